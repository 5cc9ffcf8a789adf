"""Writes the stopping demo's tasks and answers byte-identically (fixed seed).

40 small replicate-summary tasks: each attaches one plate's OD600 readings and asks for
their mean and SD in `results/summary.csv`. The anytime-valid sequence counts the task as
its unit, so a ranking settles only on tens of tasks (see docs/stopping.md); these are
small so that the demo's sandboxes run them quickly. The careful scripted agent writes
and runs `solve.py` beside this file, kept by hand as one script for every task (where the
main demo keeps one a task in `references/<task_id>/solve.py`;
`assay_testing.demo.agent_scripts` reads either), and answers
`solutions/<task_id>/answer.md`, written here.

    python examples/stopping/generate.py [--out DIR]
"""

from __future__ import annotations

import argparse
import random
import statistics
from pathlib import Path

N_TASKS = 40
SEED = 51
HERE = Path(__file__).resolve().parent

PROMPT = """\
hi, attached are the OD600 readings of the {n} replicate wells of plate {plate} (data.csv, \
one row per well). can you give me the mean and the SD of the readings? please save them \
as results/summary.csv with columns statistic,value (rows mean and sd) so I can merge the \
plates later.
"""

TASK_YAML = """\
domain: microbiology
phase: data summary
difficulty: easy
expected_output: The mean and the sample SD of the wells' OD600 readings, in results/summary.csv.
constraints:
- Write results/summary.csv with columns statistic,value and the rows mean and sd.
reference_checks:
- kind: file_exists
  name: summary
  path: results/summary.csv
- kind: number_near
  name: mean
  path: results/summary.csv
  pattern: (?m)^mean,([-+]?\\d+(?:\\.\\d+)?)
  expected: {mean}
  tolerance: 0.001
judge:
  sampling_times: 1
"""

ANSWER = """\
Summary:

The {n} wells of plate {plate} read a mean OD600 of {mean:.4f} with a sample SD of \
{sd:.4f} (n − 1 denominator). Both are in results/summary.csv (columns statistic,value), \
computed by solve.py from data.csv.
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def write_task(out: Path, index: int, rng: random.Random) -> None:
    """One task folder and its solution, from the shared seeded generator."""
    plate = f"P{index + 1:02d}"
    task_id = f"plate_summary_{index + 1:02d}"
    n = rng.randint(8, 16)
    level = rng.uniform(0.2, 1.2)
    values = [round(max(0.001, rng.gauss(level, 0.05)), 3) for _ in range(n)]
    # What solve.py reports, rounded as it writes it.
    mean, sd = round(statistics.mean(values), 4), round(statistics.stdev(values), 4)
    task = out / "tasks" / task_id
    _write(task / "prompt.md", PROMPT.format(n=n, plate=plate))
    _write(task / "task.yaml", TASK_YAML.format(mean=mean))
    rows = "".join(f"{chr(65 + i // 12)}{i % 12 + 1},{v:.3f}\n" for i, v in enumerate(values))
    _write(task / "data.csv", "well,od600\n" + rows)
    _write(
        out / "solutions" / task_id / "answer.md", ANSWER.format(n=n, plate=plate, mean=mean, sd=sd)
    )


def main() -> None:
    """Write every task under --out (this folder by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args()
    rng = random.Random(SEED)
    for i in range(N_TASKS):
        write_task(args.out, i, rng)


if __name__ == "__main__":
    main()
