"""One line per limbo bench report (JSON files named on the command line)."""
import json
import sys

for path in sys.argv[1:]:
    r = json.load(open(path))
    where = f"instances={len(r['targets'])}" if r.get("targets") else "in-process"
    line = (f"{where} clients={r['concurrency']} cycle_per_s={r['cycle_per_s']} "
            f"rounds={r['cycle_per_s_rounds']} p50={r['call_p50_ms']}ms p99={r['call_p99_ms']}ms "
            f"cpu_ms/cycle: db={r.get('db_cpu_ms_per_cycle')}")
    if r.get("targets"):
        line += (f" instances={r.get('instances_cpu_ms_per_cycle')} clients={r['cpu_ms_per_cycle']}"
                 f" wal_bytes/cycle={r.get('wal_bytes_per_cycle')}"
                 f" per_instance={[t['cycles'] for t in r['targets']]}"
                 f" calls_per_batch={[t.get('fast_path_calls_per_batch') for t in r['targets']]}")
    else:
        line += (f" process={r['cpu_ms_per_cycle']} floor_min_per_s={r['floor_min_per_s']}"
                 f" calls_per_batch={r.get('fast_path_calls_per_batch')}")
    print(line)
