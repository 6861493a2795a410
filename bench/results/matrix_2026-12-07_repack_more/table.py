"""The A/B table of this directory (table.md): python3 table.py > table.md."""

import collections
import glob
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
IDLE = "/work/wt00/bench/results/matrix_2026-12-07_idle_72h08/*.json"

rows = []
for f in sorted(HERE.glob("[AB]_*.json")):
    r = json.load(open(f))["runs"][0]
    rows.append(dict(file=f.stem, arm=f.stem[0], hours=r["hours"], seed=r["seed"],
                     gap=r["mip_gap"], obj=r["objective"], bound=r["bound"],
                     load=r["machine"]["load_average_1m"], s=r["seconds"],
                     date=r["machine"]["date_utc"], commit=r["commit"],
                     repacks=len(re.findall(r"one-slot repack: ", r["note"]))))
best = collections.defaultdict(float)
for x in rows:
    best[(x["hours"], x["seed"])] = max(best[(x["hours"], x["seed"])], x["bound"])
# the idle-machine bounds of main (all runs there): the best known per seed
for f in glob.glob(IDLE):
    for r in json.load(open(f))["runs"]:
        k = (r["hours"], r["seed"])
        best[k] = max(best[k], r["bound"])
print("| run | arm | h | seed | gap (own bound) | plan kg | bound kg | plan vs best bound "
      "| repacks | load 1m | s | UTC |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for x in sorted(rows, key=lambda x: (x["hours"], x["seed"], x["file"][1:], x["arm"])):
    x["gapbb"] = (x["obj"] - best[(x["hours"], x["seed"])]) / x["obj"]
    print(f"| {x['file']} | {x['arm']} | {x['hours']} | {x['seed']} | {x['gap'] * 100:.2f} % "
          f"| {x['obj']:.1f} | {x['bound']:.1f} | {x['gapbb'] * 100:.2f} % | {x['repacks']} "
          f"| {x['load']} | {x['s']:.1f} | {x['date']} |")
print()
print("| cell | seed | best bound | A plans | B plans | A worst gap (own) | B worst gap (own) "
      "| A worst vs best bound | B worst vs best bound |")
print("|---|---|---|---|---|---|---|---|---|")


def plans(arm):
    return ", ".join(f"{x['obj']:.1f}" for x in arm)


def worst(arm, k):
    return max(x[k] for x in arm) * 100


for key in sorted(best):
    a = [x for x in rows if (x["hours"], x["seed"]) == key and x["arm"] == "A"]
    b = [x for x in rows if (x["hours"], x["seed"]) == key and x["arm"] == "B"]
    print(f"| {key[0]} h | {key[1]} | {best[key]:.1f} | {plans(a)} | {plans(b)} "
          f"| {worst(a, 'gap'):.2f} % | {worst(b, 'gap'):.2f} % | {worst(a, 'gapbb'):.2f} % "
          f"| {worst(b, 'gapbb'):.2f} % |")
print("\ncommits:", ", ".join(sorted({x["commit"] for x in rows})))
