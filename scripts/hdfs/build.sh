#!/usr/bin/env bash
# Builds the MiniDFSCluster launcher: target/minihdfs.jar, with its dependencies in target/lib/
# (named by the jar's manifest, so `java -jar target/minihdfs.jar BASE_DIR` needs no Maven).
# Maven's downloads (~125 MB, first build only) are cached in the default ~/.m2.
# Prints the jar's path last.
set -euo pipefail
cd "$(dirname "$0")"
${NICE:-} mvn -q -B -Dstyle.color=never package >&2
echo "$PWD/target/minihdfs.jar"
