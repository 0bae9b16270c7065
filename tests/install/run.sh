#!/usr/bin/env bash
# Installs the built tree into a temporary prefix, builds a program outside the project against it
# with pkg-config and with find_package(weft), and runs it under mpirun and under plain WEFT_*
# variables. Usage: run.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/pkgconfig | head -1)
# No LD_LIBRARY_PATH: the pkg-config line carries the prefix's rpath, and CMake's imported target
# its own, so both programs find libweft under a non-system prefix by themselves.
export PKG_CONFIG_PATH="$libdir"
unset LD_LIBRARY_PATH
cc "$here/consumer.c" -o "$work/consumer_pc" $(pkg-config --cflags --libs weft)
cmake -S "$here" -B "$work/cm" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/cm" >/dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 "$work/consumer_pc"
mpirun --allow-run-as-root --oversubscribe -np 4 "$work/cm/consumer_cmake"
# Below the ephemeral range (32768 up), where a socket bound to port 0 could take it first.
port=$((10000 + RANDOM % 22000))
pids=()
for r in 0 1 2; do
  WEFT_RANK=$r WEFT_WORLD_SIZE=3 WEFT_MASTER_ADDR=127.0.0.1 WEFT_MASTER_PORT=$port WEFT_JOB_SECRET=consumer-$port \
    "$work/consumer_pc" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "install consumer: all runs OK"
