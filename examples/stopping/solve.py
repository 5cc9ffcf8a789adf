# The stopping demo's careful analysis: the same script for every one of its tasks.
import csv
import os
import statistics

with open("data.csv", newline="") as f:
    values = [float(row["od600"]) for row in csv.DictReader(f)]
os.makedirs("results", exist_ok=True)
with open("results/summary.csv", "w", newline="") as f:
    f.write("statistic,value\n")
    f.write(f"mean,{statistics.mean(values):.4f}\n")
    f.write(f"sd,{statistics.stdev(values):.4f}\n")
print(f"n={len(values)} mean={statistics.mean(values):.4f} sd={statistics.stdev(values):.4f}")
