"""Target 19 (issue 72): a 10 M-id Monolith table (gen_monolith, 16 shards, 16 float32 a row)
read into a Spark DataFrame through `modelfs.spark` with 1 and then 2 executor cores, rows/s
of a query that reads every row (`count(*), sum(vec[0])`), against `modelfs row` of 20,000 of
its ids (one process, its first look included) and against `cat` of the raw shards. The
two-core figure should be >= 1.7x the one-core one.

`python engines.py spark CORES ROOT TABLE N`: Spark `local[CORES]`, run by bench.py under
`taskset` with CORES CPUs (the JVM and the Python workers it starts inherit them: an executor
core is a CPU, not a thread sharing the machine with the JVM); `python engines.py rest ROOT
TABLE N`: the other figures. Each prints one JSON line; bench.py runs them with an
interpreter that has pyspark and modelfs (ENGINES_PYTHON).
"""

import json
import os
import subprocess
import sys
import time


def spark_rate(cores, root, name, runs):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    s = (SparkSession.builder.master(f"local[{cores}]").appName(f"bench-{cores}")
         .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.driver.memory", "2g").getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    import modelfs.spark
    modelfs.spark.register(s)
    times, got = [], None
    for _ in range(runs + 1):  # the first warms the Python workers up
        df = s.read.format("modelfs").option("tensor", name).load(root)
        df.createOrReplaceTempView("t")
        t = time.perf_counter()
        got = s.sql("SELECT count(*) AS n, sum(vec[0]) AS s FROM t").collect()[0]
        times.append(time.perf_counter() - t)
    parts = df.rdd.getNumPartitions()
    s.stop()
    times = sorted(times[1:])
    return times[len(times) // 2], got["n"], got["s"], parts


def main():
    what, args = sys.argv[1], sys.argv[2:]
    runs = int(os.environ.get("RUNS", "3"))
    if what == "spark":
        cores, root, table, n = int(args[0]), args[1], args[2], int(args[3])
        name = f"hash_tables/{table}"
        secs, count, total, parts = spark_rate(cores, root, name, runs)
        import modelfs
        _, values = modelfs.open(root).table(name)
        want = float(values[:, 0].astype("float64").sum())
        print(json.dumps({"s": secs, "rows_per_s": count / secs, "partitions": parts,
                          "count_ok": count == n == len(values),
                          "sum_ok": abs(total - want) <= 1e-6 * abs(want) + 1e-3}))
        return
    root, table, n = args[0], args[1], int(args[2])
    name = f"hash_tables/{table}"
    ids = [int(i) for i in json.load(open(os.path.join(root, f"{table}.samples.json")))]
    # 20,000 ids of the table: its samples, then ids by gen_monolith's formula.
    mask = (1 << 48) - 1
    more = [((i % 64) << 48) | ((i * 2_654_435_761) & mask) for i in range(0, n, n // 20_000)]
    asked = (ids + more)[:20_000]
    binary = os.environ.get("MODELFS_BIN", "modelfs")
    t = time.perf_counter()
    subprocess.run([binary, "row", root, name] + [str(i) for i in asked], check=True,
                   stdout=subprocess.DEVNULL)
    row_s = time.perf_counter() - t
    shards = sorted(os.path.join(root, "assets", f)
                    for f in os.listdir(os.path.join(root, "assets")))
    subprocess.run(["cat"] + shards, stdout=subprocess.DEVNULL)
    t = time.perf_counter()
    subprocess.run(["cat"] + shards, stdout=subprocess.DEVNULL)
    cat_s = time.perf_counter() - t
    print(json.dumps({"row_ids": len(asked), "row_s": row_s, "row_rows_per_s": len(asked) / row_s,
                      "cat_s": cat_s, "cat_rows_per_s": n / cat_s}))


if __name__ == "__main__":
    main()
