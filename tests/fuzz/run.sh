#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# run.sh SECONDS [TARGET...]: builds the libFuzzer targets with AddressSanitizer and
# UndefinedBehaviorSanitizer (clang), replays the saved regression inputs of each, then fuzzes each
# for SECONDS from its seed corpus. Prints a table: inputs tried, crashes; exit 1 on any crash.
# Needs config.h from ./configure (run it first). Crashing inputs are kept in $FUZZ_OUT/crashes.
set -uo pipefail
SECS=${1:?usage: run.sh SECONDS [TARGET...]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$HERE/../.." && pwd)
BUILD=${DLT_BUILDDIR:-$TOP}
OUT=${FUZZ_OUT:-$BUILD/tests/tmp/fuzz}
CC=${FUZZ_CC:-clang}
TARGETS=(${@:-options plugstack safetensors topology sysfs recordio jpeg hostlist})
[[ -f $BUILD/config.h ]] || { echo "run.sh: $BUILD/config.h missing: run ./configure first"; exit 2; }
command -v "$CC" >/dev/null || { echo "run.sh: $CC not found (apt-get install clang libclang-rt-14-dev)"; exit 2; }
mkdir -p "$OUT/crashes"

sources() {
  case $1 in
    options) echo "plugin/options.c plugin/text_escape.c common/status.c" ;;
    plugstack) echo "plugin/plugstack_conf.c plugin/options.c plugin/text_escape.c common/status.c" ;;
    safetensors) echo "trainer/checkpoint/safetensors.c common/io.c common/status.c common/crc32.c -lz" ;;
    topology) echo "common/pci_busid.c plugin/topology.c plugin/binding.c plugin/nccl_topo_xml.c plugin/topo_report.c common/status.c" ;;
    sysfs) echo "common/pci_busid.c plugin/topology.c plugin/nccl_topo_xml.c common/status.c" ;;
    recordio) echo "trainer/data/dataset.c trainer/data/imagefolder.c trainer/data/recordio.c common/io.c common/status.c" ;;
    jpeg) echo "trainer/data/transform.c common/status.c tests/fuzz/stb_image_impl.c -lturbojpeg -ljpeg -lstb -lz -lm" ;;
    hostlist) echo "common/hostlist.c" ;;
    *) return 1 ;;
  esac
}

seed() {  # target dir
  local t=$1 d=$2
  mkdir -p "$d"
  case $t in
    options)
      printf 'bind=none,nccl=off,nic=mlx5_0,verbose\0default_bind=closest\ntopo_dir=/run/%%n/dlt' > "$d/s1"
      printf 'gpus=step\0enable=always\nnccl_ib_hca=mlx5_0:1,mlx5_1' > "$d/s2"
      printf 'bind=numa\0frob=1' > "$d/s3" ;;
    plugstack)
      printf '# site\ninclude plugstack.conf.d/*.conf\nrequired /usr/lib/slurm/spank_dltrain.so default_bind=numa # typo\n' > "$d/s1"
      printf 'optional\tspank_dltrain.so enable=always topo_dir=/run/%%n/d\r\nrequired x.so\nPlugStackConfig="/etc/slurm/p s.conf"\n' > "$d/s2"
      printf 'Required spank_dltrain.so\nrequired\nrequired spank_dltrain.so a=1\nrequired spank_dltrain.so a=1\n' > "$d/s3" ;;
    safetensors)
      python3 - "$d/s1" <<'PY'
import json, struct, sys
h = json.dumps({"__metadata__": {"format": "pt"}, "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                "n": {"dtype": "I64", "shape": [], "data_offsets": [16, 24]}}).encode()
h += b" " * ((8 - (8 + len(h)) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(24))
PY
      ;;
    topology) head -c 512 /dev/urandom > "$d/s1"; head -c 64 /dev/urandom > "$d/s2" ;;
    recordio)
      python3 - "$d" <<'PY'
import struct, sys
def rec(cflag, payload):
    n = len(payload)
    return struct.pack("<II", 0xced7230a, (cflag << 29) | n) + payload + bytes((4 - n % 4) % 4)
hdr = struct.pack("<IfQQ", 0, 3.0, 7, 0)
open(sys.argv[1] + "/s1", "wb").write(rec(0, hdr + b"\xff\xd8jpegdata") + rec(1, hdr + b"ab") + rec(2, b"cd") + rec(3, b"e"))
PY
      ;;
    jpeg)
      if [[ -x $BUILD/tests/fixtures/mkjpegs ]]; then
        "$BUILD/tests/fixtures/mkjpegs" bench "$d" 2 40 30 80 >/dev/null
        "$BUILD/tests/fixtures/mkjpegs" folder "$d/f" 1 4 24 16 variants >/dev/null
        "$BUILD/tests/fixtures/mkjpegs" folder "$d/p" 2 12 20 14 png >/dev/null # PNG of every kind
        n=0; for f in "$d"/f/*/*/* "$d"/p/*/*/*; do n=$((n + 1)); mv "$f" "$d/s$n"; done; rm -rf "$d/f" "$d/p"
      else
        printf '\xff\xd8\xff\xe0' > "$d/s1"
      fi ;;
    hostlist) printf 'x[3-4]y[1-2],gpu[007-010,12] login1' > "$d/s1"; printf 'gpu-a[7,9-12]-ib,n[1-2' > "$d/s2"
              printf 'n[1-2]x[3-4]z[5-6]\tn9,n10' > "$d/s3" ;;
    sysfs) printf '0|0-3,8|0x030200|16.0 GT/s PCIe|100 Gb/sec (4X EDR)|248a:0703:0049:d4f0|ib0|.' > "$d/s1"
           printf -- '-1|garbage|0x02|weird|abc|zz|eth0|x' > "$d/s2" ;;
  esac
}

printf '%-12s %-14s %-10s %s\n' target inputs crashes regressions
fail=0
for t in "${TARGETS[@]}"; do
  src=$(sources "$t") || { echo "run.sh: unknown target $t"; exit 2; }
  bin=$OUT/fuzz_$t
  # shellcheck disable=SC2046
  if ! (cd "$TOP" && $CC -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -I"$TOP" -I"$BUILD" -include "$BUILD/config.h" -o "$bin" "tests/fuzz/fuzz_$t.c" $src) > "$OUT/$t.build.log" 2>&1; then
    echo "run.sh: building fuzz_$t failed:"; tail -5 "$OUT/$t.build.log"; fail=1; continue
  fi
  corpus=$OUT/corpus/$t
  [[ -d $corpus ]] || seed "$t" "$corpus"
  reg=0 regfail=0
  if [[ -d $HERE/regress/$t ]]; then
    for f in "$HERE"/regress/"$t"/*; do
      [[ -f $f ]] || continue
      reg=$((reg + 1))
      "$bin" "$f" > "$OUT/$t.regress.log" 2>&1 || { regfail=$((regfail + 1)); echo "run.sh: regression input $f crashes fuzz_$t"; }
    done
  fi
  "$bin" -max_total_time="$SECS" -print_final_stats=1 -artifact_prefix="$OUT/crashes/$t-" -rss_limit_mb=2048 \
    "$corpus" > "$OUT/$t.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$t.log" | tail -1)
  crashes=$(ls "$OUT"/crashes/"$t"-* 2>/dev/null | wc -l)
  printf '%-12s %-14s %-10s %s\n' "$t" "${execs:-0}" "$crashes" "$reg replayed, $regfail failing"
  if ((rc != 0 || crashes > 0 || regfail > 0)); then fail=1; grep -m3 -E 'ERROR|SUMMARY' "$OUT/$t.log"; fi
done
exit $fail
