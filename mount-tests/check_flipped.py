"""One tensor of a mounted checkpoint is bad: `.npz` and `.safetensors` must fail it alone.

argv: mountpoint, the bad tensor's key, then `KEY=PATH` for every intact tensor (PATH: its
`.npy` on the mount). Each intact tensor is read from `.npz` by `np.load`, and from
`.safetensors` by `safe_open` in a subprocess of its own (a fault there is SIGBUS, not an
exception), and must equal its `.npy`; the bad one must fail both ways. Exit 1 naming every
miss; prints what it checked.
"""
import subprocess
import sys

import numpy as np

mnt, bad_key = sys.argv[1], sys.argv[2]
intact = dict(a.split("=", 1) for a in sys.argv[3:])
miss = []
z = np.load(f"{mnt}/.npz")
for key, npy in sorted(intact.items()):
    want = np.load(npy)
    try:
        got = z[key]
    except Exception as e:  # noqa: BLE001: any failure is a miss here
        miss.append(f".npz {key}: {type(e).__name__}: {e}")
        continue
    if got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
        miss.append(f".npz {key}: differs from its .npy")
try:
    z[bad_key]
    miss.append(f".npz {bad_key}: read although bad")
except OSError:
    pass

READ = """
import sys, numpy as np
from safetensors import safe_open
with safe_open(sys.argv[1], "np") as f:
    a = f.get_tensor(sys.argv[2])
sys.stdout.buffer.write(a.tobytes())
"""
for key, npy in sorted(intact.items()):
    p = subprocess.run([sys.executable, "-c", READ, f"{mnt}/.safetensors", key],
                       capture_output=True, timeout=120)
    if p.returncode != 0:
        miss.append(f".safetensors {key}: exit {p.returncode}: {p.stderr.decode()[-300:]}")
    elif p.stdout != np.load(npy).tobytes():
        miss.append(f".safetensors {key}: differs from its .npy")
p = subprocess.run([sys.executable, "-c", READ, f"{mnt}/.safetensors", bad_key],
                   capture_output=True, timeout=120)
if p.returncode == 0:
    miss.append(f".safetensors {bad_key}: read although bad")
print(f"checked {len(intact)} intact tensors and {bad_key} through .npz and .safetensors")
for m in miss:
    print(m)
sys.exit(1 if miss else 0)
