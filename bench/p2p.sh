#!/usr/bin/env bash
# bench/p2p.sh: Weft's point-to-point benchmarks beside their C MPI twins.
#
# Builds Weft's Go driver (./bench/p2p) and the C twin (bench/peers/p2p.c)
# with MPICH and Open MPI, runs every test for each of them interleaved
# (weft, mpich, openmpi, test after test, round after round) so that all
# three see the same machine state, then tabulates the medians with
# bench/tabulate into docs/benchmarks.md between
#   <!-- p2p:begin --> and <!-- p2p:end -->
# and keeps the raw result lines in bench/results/p2p-raw.txt.
#
# Usage (from the repository root):
#   bash bench/p2p.sh [--rounds N] [--timeout SECONDS] [--quick]
#     --rounds N     rounds of the whole suite (default 3); cells are medians
#     --timeout S    limit for one run of one implementation (default 120)
#     --quick        a tenth of the iterations: a smoke test, not for publishing
#
# A missing peer (no mpicc/launcher) or a missing Weft driver is reported on
# stderr and shows as "absent" in the table; a run that fails or times out
# shows as "failed". Nothing is skipped silently.
set -euo pipefail

rounds=3
per_run_timeout=120
quick=0
cmdline="bash bench/p2p.sh${*:+ $*}"
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
	--rounds=*) rounds="${1#*=}"; shift ;;
	--timeout) per_run_timeout="${2:?--timeout needs seconds}"; shift 2 ;;
	--timeout=*) per_run_timeout="${1#*=}"; shift ;;
	--quick) quick=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "p2p.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
case "$rounds" in '' | *[!0-9]* | 0) echo "p2p.sh: --rounds wants a positive integer" >&2; exit 2 ;; esac
case "$per_run_timeout" in '' | *[!0-9]* | 0) echo "p2p.sh: --timeout wants a positive integer" >&2; exit 2 ;; esac

if [ ! -f bench/peers/p2p.c ] || [ ! -f bench/tabulate/main.go ]; then
	echo "p2p.sh: run me from the repository root (bench/peers/p2p.c not found)" >&2
	exit 2
fi

OUT="$(mktemp -d "${TMPDIR:-/tmp}/weft-p2p.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
RESULTS=bench/results
RAW="$RESULTS/p2p-raw.txt"
DOC=docs/benchmarks.md
mkdir -p "$RESULTS" docs

note() { echo "p2p.sh: $*" >&2; }
notes=() # shown above the table too

# ---- build ---------------------------------------------------------------

go build -o "$OUT/tabulate" ./bench/tabulate/main.go

# status of each implementation: ok, absent or failed (build)
declare -A status
impls=(weft mpich openmpi)

if [ ! -d bench/p2p ]; then
	status[weft]=absent
	notes+=("Weft's driver ./bench/p2p does not exist yet: the weft column is absent; peers only.")
	note "NOTE: ./bench/p2p does not exist yet; running the C peers only (weft shows as absent)"
elif ! go build -o "$OUT/weft-p2p" ./bench/p2p 2>"$OUT/weft-build.log"; then
	status[weft]=failed
	notes+=("Weft's driver ./bench/p2p failed to build: the weft column shows failed.")
	note "ERROR: go build ./bench/p2p failed:"
	sed 's/^/    /' "$OUT/weft-build.log" >&2
else
	status[weft]=ok
fi

# build_peer NAME: compiles the C twin with mpicc.NAME if it and its launcher exist.
build_peer() {
	local name=$1 launcher=$2
	if ! command -v "mpicc.$name" >/dev/null || ! command -v "$launcher" >/dev/null; then
		status[$name]=absent
		notes+=("Peer $name is absent (mpicc.$name or $launcher not found).")
		note "ABSENT: peer $name (mpicc.$name or $launcher not on PATH); it shows as absent"
		return
	fi
	if "mpicc.$name" -O2 -o "$OUT/p2p.$name" bench/peers/p2p.c -lpthread 2>"$OUT/$name-build.log"; then
		status[$name]=ok
	else
		status[$name]=failed
		notes+=("Peer $name: bench/peers/p2p.c failed to build with mpicc.$name.")
		note "ERROR: mpicc.$name failed to build bench/peers/p2p.c:"
		sed 's/^/    /' "$OUT/$name-build.log" >&2
	fi
}
build_peer mpich mpiexec.mpich
build_peer openmpi mpirun.openmpi

# How each implementation is started with NP ranks. Weft's driver runs all
# ranks as goroutines of one process: no launcher.
# Open MPI: --allow-run-as-root (we may be root), --oversubscribe (2K ranks
# on 2 cores), --bind-to none (several ranks share a core), ob1 + vader:
# shared memory, which also provides MPI_THREAD_MULTIPLE.
MPICH_LAUNCH=(mpiexec.mpich -n)
OMPI_LAUNCH=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none
	--mca pml ob1 --mca btl self,vader -n)

# ---- the suite -------------------------------------------------------------

# Each test: "bench size pairs mode np iters". Iteration counts are the
# same for every implementation and keep one run to seconds on 2 cores
# (thread modes and oversubscribed ranks are slow for the busy-polling C MPIs).
tests=(
	"pingpong 8 1 proc 2 100000"
	"pingpong 4194304 1 proc 2 500"
	"bw 8 1 proc 2 10000"
	"bw 4194304 1 proc 2 30"
	"msgrate 0 1 proc 2 500000"
	"msgrate 0 2 proc 4 100000"
	"msgrate 0 4 proc 8 20000"
	"msgrate 0 1 thread 2 100000"
	"msgrate 0 2 thread 2 20000"
	"msgrate 0 4 thread 2 10000"
	"latency_mt 8 2 thread 2 5000"
)

# metrics BENCH: the metric:unit pairs a bench prints.
metrics() {
	case "$1" in
	pingpong) echo "latency:us bandwidth:GB/s" ;;
	bw) echo "bandwidth:GB/s" ;;
	msgrate) echo "rate:Mmsg/s" ;;
	latency_mt) echo "latency:us" ;;
	esac
}

: >"$OUT/lines.txt"
nfail=0

# run ROUND IMPL TEST...: runs one test for one implementation and appends its
# result lines (or failed/absent lines) to $OUT/lines.txt.
run() {
	local round=$1 impl=$2 bench=$3 size=$4 pairs=$5 mode=$6 np=$7 iters=$8
	if [ "$quick" = 1 ]; then iters=$(((iters + 9) / 10)); fi
	local args=(-bench "$bench" -iters "$iters" -impl "$impl")
	case "$bench" in
	pingpong | bw) args+=(-size "$size") ;;
	msgrate) args+=(-pairs "$pairs" -mode "$mode") ;;
	latency_mt) args+=(-threads "$pairs") ;;
	esac
	local cmd=()
	case "$impl" in
	weft) cmd=("$OUT/weft-p2p") ;;
	mpich) cmd=("${MPICH_LAUNCH[@]}" "$np" "$OUT/p2p.mpich") ;;
	openmpi) cmd=("${OMPI_LAUNCH[@]}" "$np" "$OUT/p2p.openmpi") ;;
	esac
	local got="$OUT/run.out" err="$OUT/run.err" rc=0 why=""
	: >"$got"
	if [ "${status[$impl]}" = ok ]; then
		timeout --kill-after=10 "$per_run_timeout" "${cmd[@]}" "${args[@]}" >"$got" 2>"$err" </dev/null || rc=$?
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			why="timeout"
		elif [ "$rc" != 0 ]; then
			why="exit-$rc"
		fi
	else
		why="${status[$impl]}"
	fi
	# keep this impl's well-formed lines, then fill in what is missing
	local m metric unit value line summary=""
	for m in $(metrics "$bench"); do
		metric=${m%%:*}
		unit=${m#*:}
		line=""
		if [ -z "$why" ]; then
			# The row key (size, pairs, mode) is the test's, whatever the
			# program printed: a driver that prints its unused -size for
			# msgrate, or pairs=1 mode=proc for latency_mt, still lands in
			# the right row (and is told so on stderr).
			line=$(awk -v b="$bench" -v i="$impl" -v m="$metric" -v size="$size" -v pairs="$pairs" -v mode="$mode" '
				{ delete f; for (k = 1; k <= NF; k++) { p = index($k, "="); if (p) f[substr($k, 1, p - 1)] = substr($k, p + 1) } }
				f["bench"] == b && f["impl"] == i && f["metric"] == m && f["value"] ~ /^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ {
					if (f["size"] != size || f["pairs"] != pairs || f["mode"] != mode)
						printf "p2p.sh: note: %s printed size=%s pairs=%s mode=%s for %s; filed as size=%s pairs=%s mode=%s\n", i, f["size"], f["pairs"], f["mode"], b, size, pairs, mode > "/dev/stderr"
					printf "bench=%s impl=%s size=%s pairs=%s mode=%s metric=%s value=%s unit=%s\n", b, i, size, pairs, mode, m, f["value"], f["unit"]
					exit
				}
			' "$got")
			if [ -z "$line" ]; then why="no-output"; fi
		fi
		if [ -n "$line" ]; then
			echo "$line round=$round" >>"$OUT/lines.txt"
			summary+=" $metric=$(sed -n 's/.* value=\([^ ]*\).*/\1/p' <<<"$line")"
		else
			value=failed
			if [ "$why" = absent ]; then value=absent; fi
			echo "bench=$bench impl=$impl size=$size pairs=$pairs mode=$mode metric=$metric value=$value unit=$unit round=$round reason=$why" >>"$OUT/lines.txt"
			summary+=" $metric=$value"
		fi
	done
	note "  r$round $bench size=$size pairs=$pairs $mode $impl:$summary"
	if [ -n "$why" ] && [ "$why" != absent ] && [ "${status[$impl]}" = ok ]; then
		nfail=$((nfail + 1))
		note "FAILED ($why): $impl: ${cmd[*]} ${args[*]}"
		if [ -s "$err" ]; then tail -n 5 "$err" | sed 's/^/    /' >&2; fi
	fi
	return 0
}

start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
	note "round $r of $rounds"
	for t in "${tests[@]}"; do
		# shellcheck disable=SC2086 # word splitting of the test spec is intended
		set -- $t
		for impl in "${impls[@]}"; do
			run "$r" "$impl" "$@"
		done
	done
done
elapsed=$(($(date +%s) - start))

# ---- write results ---------------------------------------------------------

mpich_version="absent"
if command -v mpichversion >/dev/null; then
	mpich_version="$(mpichversion | sed -n 's/^MPICH Version:[[:space:]]*/MPICH /p') ($(mpichversion | sed -n 's/^MPICH Device:[[:space:]]*//p'))"
elif command -v mpiexec.mpich >/dev/null; then
	mpich_version="$(mpiexec.mpich --version 2>&1 | head -n 3 | tr -s ' \n' ' ')"
fi
ompi_version="absent"
if command -v mpirun.openmpi >/dev/null; then
	ompi_version="$(mpirun.openmpi --version 2>&1 | head -n 1)"
fi
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
when="$(date -u '+%Y-%m-%d %H:%M UTC')"

{
	echo "# bench/p2p.sh raw results, $when, $rounds round(s): $cmdline"
	echo "# kernel $(uname -r); $(nproc) cores; ${cpu:-unknown CPU}; $(go version)"
	echo "# peers: $mpich_version; $ompi_version"
	cat "$OUT/lines.txt"
} >"$RAW"

section="$OUT/section.md"
{
	echo "## Point-to-point: Weft beside MPICH and Open MPI"
	echo
	echo "Written by \`bench/p2p.sh\`; do not edit between the markers."
	echo
	echo "- Date: $when"
	echo "- Machine: Linux $(uname -r), $(nproc) cores, ${cpu:-unknown CPU}; $(go version | sed 's/^go version //')"
	echo "- Peers: $mpich_version; $ompi_version (both built from \`bench/peers/p2p.c\` with \`-O2\`)"
	echo "- Launch: weft: \`weft-p2p FLAGS\` (all ranks in one process); mpich: \`${MPICH_LAUNCH[*]} NP p2p.mpich FLAGS\`; openmpi: \`${OMPI_LAUNCH[*]} NP p2p.openmpi FLAGS\`"
	echo "- Rounds: $rounds, interleaved (weft, mpich, openmpi per test), $elapsed s in all; raw lines in \`$RAW\`"
	echo "- Command: \`$cmdline\`"
	if [ "$quick" = 1 ]; then echo "- **--quick: a tenth of the iterations, a smoke test; do not quote these figures.**"; fi
	for n in "${notes[@]+"${notes[@]}"}"; do
		echo "- **Note:** $n"
	done
	echo
	echo "Tests: pingpong = blocking Send/Recv, one-way latency and size/latency; bw = 64 Isend/Irecv in flight (OSU osu_bw);"
	echo "msgrate = zero-byte messages, a reply every 256, K sender/receiver pairs as K rank pairs (proc) or K threads of 2 ranks (thread);"
	echo "latency_mt = 8-byte ping-pong, one sender thread against 2 receiver threads (OSU osu_latency_mt)."
	echo "2 cores: more than 2 busy-polling ranks or threads oversubscribe them, which the C MPIs pay for heavily."
	echo
	"$OUT/tabulate" <"$OUT/lines.txt"
} >"$section"

begin='<!-- p2p:begin -->'
end='<!-- p2p:end -->'
if [ ! -f "$DOC" ]; then
	printf '# Benchmarks\n\n%s\n%s\n' "$begin" "$end" >"$DOC"
fi
if ! grep -qF "$begin" "$DOC" || ! grep -qF "$end" "$DOC"; then
	note "$DOC has no $begin / $end markers; appending them at its end"
	printf '\n%s\n%s\n' "$begin" "$end" >>"$DOC"
fi
awk -v begin="$begin" -v end="$end" -v section="$section" '
	$0 == begin { print; while ((getline l < section) > 0) print l; skip = 1; next }
	$0 == end { skip = 0 }
	!skip { print }
' "$DOC" >"$OUT/doc.md"
cat "$OUT/doc.md" >"$DOC"

cat "$section"
note "wrote $DOC and $RAW ($nfail failed run(s), $elapsed s)"
