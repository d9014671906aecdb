#!/usr/bin/env bash
# modelfs performance benchmark (README "Performance").
#
#   scripts/bench.sh            build (release), generate fixtures if missing, measure, print table
#   scripts/bench.sh --clean    remove the work directory (fixtures, caches, mount points) and exit
#
# Environment:
#   BENCH_DIR=/tmp/modelfs-bench   work directory (about 5.2 GiB of fixtures)
#   RUNS=5                         median of RUNS runs for every figure (LS_RUNS for target 2)
#   ONLY=1,3                       run only these targets (1 mount, 2 ls -lR, 3 bin/npy vs bindfs + fio,
#                                  4 txt first reads (fresh cat/tail/wc vs sizes known and index), 5 tail/stat, 6 peak RSS,
#                                  7 S3: GETs per mount / tail / second cat, cat vs plain GET,
#                                  8 views: .tf/model.index checksums, 9 Angel at production size:
#                                  ls -lR, head, cat lr.libsvm vs raw files, peak RSS; ~4 GB generated),
#                                  10 rows by id: a 10 M-id Monolith table (gen_monolith), a 10 M-id TF
#                                  hash table (tensorflow-cpu writes it) and target 9's Angel embedding:
#                                  index build, lookup p99, exactness, peak RSS,
#                                  11 stats of the 1 GiB W and diff of two 1 GiB checkpoints vs verify,
#                                  12 a directory gaining 500 checkpoints while mounted: ls, time to show, RSS,
#                                  13 loads through a fresh mount vs the same library on its own local file:
#                                  safetensors, np.load of .npz, random rows by np.load(mmap_mode='r') (and
#                                  bindfs), tf.train.load_checkpoint of .tf/ (model written by TensorFlow)
#                                  14 sources of the newer readers: a 1 GiB sharded safetensors model, a
#                                  1 GiB np.savez .npz and a 1 GiB torch.save checkpoint (mount time and
#                                  source bytes read; cat of a .bin vs the same bytes of the file), and
#                                  TensorFlow reading .tf/ of the torch checkpoint vs torch.load
#                                  15 diff --rows of two saves of a 10 M-id table (1 % changed, 0.1 %
#                                  added, 0.1 % removed): TF MutableHashTable (TensorFlow writes both),
#                                  Monolith, Angel embedding: exactness, time vs verify of both, peak RSS
#                                  16 the Python package (wheel in a venv): m[name] vs TensorFlow and safetensors, rows p99, RSS
#                                  17 four readers of a fresh 1 GiB tensor's quarters vs one reader of the whole (one checksum pass)
#                                  18 HDFS (a MiniDFSCluster, scripts/hdfs, needs java): first cat of a 256 MiB tensor by
#                                  hdfs:// and webhdfs:// vs Hadoop's FsShell -cat, verify=crc vs none, ls -lR of the 100k
#                                  checkpoint vs local with the NameNode's RPCs counted
#   TORCH_PYTHON=python3           target 14's python for torch (a scratch venv: pip install torch)
#   TF_PYTHON=python3              target 13's python: numpy, safetensors and tensorflow-cpu
#   SAVETXT_VALUES=2000000         values numpy.savetxt formats for its rate
#   QUIET=1                        pause the kernel's DAMON page-out schemes for the run (root;
#                                  restored at exit): on machines that page cold page cache out
#                                  proactively, warm-read and server figures otherwise vary 2-5x
# Needs: cargo, python3 with numpy (tensorflow-cpu for the TF baselines), fusermount3; target 3: bindfs and fio (installed from Debian when run as root);
# target 7: moto_server and boto3 (pip install 'moto[server]'), curl; s3s-fs and nginx when present (s3s-fs is built with cargo install when missing).
# Fixtures are written by examples/gen_bench_ckpt.rs (streaming; TF reads them too).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_DIR="${BENCH_DIR:-/tmp/modelfs-bench}"

if [[ "${1:-}" == "--clean" ]]; then
    for m in "$BENCH_DIR"/mnt-*; do
        [[ -d "$m" ]] && { fusermount3 -u "$m" 2>/dev/null || true; rmdir "$m" 2>/dev/null || true; }
    done
    rm -rf "$BENCH_DIR"
    echo "removed $BENCH_DIR"
    exit 0
fi

# Target 3's anchors: a plain FUSE passthrough and fio, from Debian when we may install them.
if ! command -v bindfs > /dev/null || ! command -v fio > /dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get > /dev/null; then
        apt-get install -y -qq bindfs fio > /dev/null 2>&1 || echo "bench: could not install bindfs/fio" >&2
    fi
fi
# Target 15 measures the CLI's peak RSS with GNU time (package `time`).
if [[ ! -x /usr/bin/time ]] && [[ $(id -u) == 0 ]] && command -v apt-get > /dev/null; then
    apt-get install -y -qq time > /dev/null 2>&1 || echo "bench: could not install time" >&2
fi
# Target 7's second S3 server (a seek per ranged GET, unlike moto): built once from crates.io.
if [[ -z "${ONLY:-}" || ",$ONLY," == *,7,* ]] && ! command -v s3s-fs > /dev/null; then
    echo "bench: building s3s-fs (cargo install s3s-fs, a few minutes, once)" >&2
    cargo install --quiet --locked s3s-fs --version 0.14.1 --features binary > /dev/null 2>&1 \
        || echo "bench: could not install s3s-fs; its row is skipped" >&2
fi
# Target 18's cluster: Hadoop's jars from Maven Central, built once.
if [[ -z "${ONLY:-}" || ",$ONLY," == *,18,* ]] && [[ ! -e scripts/hdfs/target/minihdfs.jar ]] \
    && command -v mvn > /dev/null; then
    scripts/hdfs/build.sh > /dev/null || echo "bench: could not build scripts/hdfs" >&2
fi
if [[ "${QUIET:-}" == 1 ]]; then
    paused=()
    for k in /sys/kernel/mm/damon/admin/kdamonds/[0-9]*; do
        if [[ -w "$k/state" && $(cat "$k/state") == on ]]; then
            echo off > "$k/state" && paused+=("$k")
        fi
    done
    if (( ${#paused[@]} )); then
        echo "bench: paused DAMON (${paused[*]}) for the run" >&2
        trap 'for k in "${paused[@]}"; do echo on > "$k/state"; done; echo "bench: DAMON resumed" >&2' EXIT
    fi
fi
cargo build --release --quiet --bin modelfs --example gen_bench_ckpt --example format_rate --example crc_rate \
    --example gen_monolith
# Where cargo just built them: a CARGO_TARGET_DIR of one's own, else ./target.
target="${CARGO_TARGET_DIR:-$PWD/target}"
export MODELFS="$target/release/modelfs"
export GEN="$target/release/examples/gen_bench_ckpt"
export GEN_MONOLITH="$target/release/examples/gen_monolith"
export FORMAT_RATE="$target/release/examples/format_rate"
export CRC_RATE="$target/release/examples/crc_rate"
python3 scripts/bench/bench.py
