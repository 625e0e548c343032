#!/usr/bin/env bash
# The executor's validation matrix (issue 18; results in docs/validation.md): every plan of
# scenarios/validate-local.yaml run for real on this machine's CPU device and simulated with the
# device's measured rates, then ZeRO-Infinity again striped over two storage directories.
#   scripts/validation-matrix.sh [BUILD_DIR] [STORAGE_DIR_1] [STORAGE_DIR_2] [SCALE]
# SCALE (optional) is validate's --scale, e.g. layers=4,hidden=1024,seq=32 (a step with more
# parameters per token: more of it is transfers).
# Storage directories must be on a file system that takes O_DIRECT (not tmpfs); by default two
# folders under the build directory. Each run's JSON goes to BUILD_DIR/validation/, named by
# device, scale and UTC time (matrix-cpu-layers-4-hidden-1024-seq-32-20261204T1800Z.json and its
# zero-infinity-2dirs-... twin), so runs at other scales or on other devices are kept side by side;
# each file appears whole or not at all (written beside it, then renamed).
# The prediction (issue 40): `ftplan calibrate --quick` runs first, in a process of its own, and
# writes the CPU device's rates over a grid of shapes and the storage directories' striped rates
# to a profile (kept beside the JSON); each plan is then predicted from that profile before it
# runs. The rates the run's own probes give (before the first step and after each) are simulated
# too, as a diagnostic column: they come from the run checked, so they cannot disagree by much.
# A row whose step, simulated at each probe's rates, spreads more than 10% is marked **drifted**.
# PROFILE=FILE uses a profile measured earlier instead of measuring one.
# FTPLAN_DEVICE=cuda runs the step on the CUDA device (a CUDA build; calibrate/run-on-gpu.sh does):
# there is no CUDA device profile yet, so its rows are simulated at in-run rates only.
# The load average is printed before and after: the table is only as good as it.
set -euo pipefail
build=${1:-build}
d1=${2:-$build/validation/nvme0}
d2=${3:-$build/validation/nvme1}
scale=()
[[ -n "${4:-}" ]] && scale=(--scale "$4")
scale+=(--device "${FTPLAN_DEVICE:-cpu}")
mkdir -p "$build/validation" "$d1" "$d2"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)" >&2
ftplan=$build/cli/ftplan
tag=${FTPLAN_DEVICE:-cpu}${4:+-$(tr -c 'A-Za-z0-9\n' - <<<"$4")}-$(date -u +%Y%m%dT%H%MZ)
matrix=$build/validation/matrix-$tag.json two_dirs=$build/validation/zero-infinity-2dirs-$tag.json
trap 'rm -f "$matrix.part" "$two_dirs.part"' EXIT
rates=(--in-run-rates)
if [[ ${FTPLAN_DEVICE:-cpu} == cpu ]]; then
  profile=${PROFILE:-$build/validation/profile-$tag.yaml}
  if [[ -z ${PROFILE:-} ]]; then
    "$ftplan" calibrate --quick --no-gpu --no-fio --storage-dir "$d1,$d2" --out "$profile" >/dev/null
    echo "profile: $profile (measured before the runs, in its own process)" >&2
  fi
  rates+=(--profile "$profile")
fi
# (validate exits 1 when a plan could not be validated; the table says which and why.)
"$ftplan" validate scenarios/validate-local.yaml "${scale[@]}" "${rates[@]}" --storage-dir "$d1" --steps 5 --format json \
  > "$matrix.part" || true
mv "$matrix.part" "$matrix"
"$ftplan" validate scenarios/validate-local.yaml "${scale[@]}" "${rates[@]}" --plan ZeRO-Infinity --storage-dir "$d1,$d2" --steps 5 --format json \
  > "$two_dirs.part" || true
mv "$two_dirs.part" "$two_dirs"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%H:%M:%S) UTC)" >&2
echo "JSON: $matrix, $two_dirs" >&2
python3 - "$matrix" "$two_dirs" <<'PY'
import json, sys
print("| configuration | step measured: median (range of steps 2-5) | predicted | error | at in-run rates: error | offload overhead (step - compute) meas. / pred. (error) | rate drift: step simulated at each probe, spread (error range); spread of the timed steps | rate that moved most "
      "| compute stream busy meas. (CPU) / sim. "
      "| device peak meas. / sim. | host peak meas. / sim. | process peak RSS / sim. device + host | bytes moved (counted) vs simulated | bound by (meas. / sim.) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    two = "2dirs" in path.rsplit("/", 1)[-1]
    for r in json.load(open(path))["results"]:
        name = r["plan"] + (", 2 directories" if two else "")
        if not r["ok"]:
            print(f"| {name} | not run: {r['problem']} ||||||||||||")
            continue
        later = r["measured_step_times_s"][1:] or r["measured_step_times_s"]
        compute = next((s for s in r["streams"] if s["name"] == "compute"),
                       {"measured_busy_s": 0, "measured_cpu_s": 0, "simulated_busy_s": 0})
        # What moved, counted where it moved (copy calls, NVMe requests; block I/O from the kernel)
        # against the simulated bytes; links nothing counts (host DRAM, CPU) are left out.
        def moved(l):
            c = l.get("counted_bytes")
            text = f"{l['name'].replace(' (share)', '')} {c / 2**20:.1f}"
            if l.get("block_io_bytes") is not None:
                text += f" (block {l['block_io_bytes'] / 2**20:.1f})"
            return text + f" vs {l['simulated_bytes'] / 2**20:.1f} MiB"
        links = "; ".join(moved(l) for l in r["links"] if l.get("counted_bytes") is not None) or "(no copies)"
        rss = r.get("measured_process_peak_bytes")
        rss = f"{rss / 2**20:.0f} / {(r['simulated_device_peak_bytes'] + r['simulated_host_peak_bytes']) / 2**20:.0f} MiB" if rss else "-"
        mib = lambda b: f"{b / 2**20:.2f}"
        at = r.get("simulated_step_times_at_samples_s", [])
        lo, hi = r.get("step_time_error_pct_range", [0, 0])
        drift = (f"{min(at) * 1e3:.0f}-{max(at) * 1e3:.0f} ms over {len(at)}, {r['rate_drift_pct']:.1f}% "
                 f"({lo:+.1f}..{hi:+.1f}%)" + (" **drifted**" if r["rates_drifted"] else "")
                 + f"; steps {r.get('measured_step_spread_pct', 0):.1f}%") if at else "one probe"
        spread = sorted(r.get("rates", {}).items(), key=lambda kv: -kv[1]["spread_pct"])
        moved = f"{spread[0][0]} {spread[0][1]['spread_pct']:.0f}%" if spread else ""
        print(f"| {name} | {r['measured_step_time_s'] * 1e3:.0f} ms ({min(later) * 1e3:.0f}-{max(later) * 1e3:.0f}) "
              f"| {r['simulated_step_time_s'] * 1e3:.0f} ms ({r['rates_from']}) | {r['step_time_error_pct']:+.1f}% "
              + (f"| {r['in_run_step_time_error_pct']:+.1f}% " if 'in_run_step_time_error_pct' in r else "| - ")
              + (f"| {r['measured_offload_overhead_s'] * 1e3:.0f} / {r['simulated_offload_overhead_s'] * 1e3:.0f} ms "
                 f"({r['offload_overhead_error_pct']:+.0f}%) " if r.get('offload_overhead_error_pct') is not None else "| - ")
              + f"| {drift} | {moved} "
              f"| {compute['measured_busy_s'] * 1e3:.0f} ({compute.get('measured_cpu_s', 0) * 1e3:.0f}) / "
              f"{compute['simulated_busy_s'] * 1e3:.0f} ms "
              f"| {mib(r['measured_device_peak_bytes'])} / {mib(r['simulated_device_peak_bytes'])} MiB "
              f"| {mib(r['measured_host_peak_bytes'])} / {mib(r['simulated_host_peak_bytes'])} MiB | {rss} | {links} "
              f"| {r['bound_by']['measured'].replace(' (share)', '')} / {r['bound_by']['simulated'].replace(' (share)', '')} |")
PY
