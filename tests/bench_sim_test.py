#!/usr/bin/python3
"""scripts/bench-sim's judgement of a run (its goals, ratios and diagnostics) on hand-made results,
and its whole path (runs, judgement, summary) against a stand-in for orrery-sim that prints
fixed results: the goals must fail where the figures miss them, not only pass where they meet them.

usage: bench_sim_test.py PATH/TO/scripts/bench-sim
"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

BENCH = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "bench-sim")
_loader = importlib.machinery.SourceFileLoader("bench_sim", BENCH)
_spec = importlib.util.spec_from_loader("bench_sim", _loader)
bench = importlib.util.module_from_spec(_spec)
_loader.exec_module(bench)

TIERS = ("premium", "standard", "basic")


def result(policy, avg_jct=1000.0, p99_jct=5000.0, util=0.8, waits=(1.0, 2.0, 3.0), premium_p99=100.0,
           premium_load=0.5, pinned=None, jobs=(10, 10, 10), gangs=(0, 0, 0), waits_one=None, waits_gangs=None):
    """One policy's figures as orrery-sim --json prints them (the fields bench-sim reads)."""
    per = lambda v: dict(zip(TIERS, v))
    return {
        "policy": policy, "jobs": sum(jobs), "unfinished": 0,
        "avg_jct_s": avg_jct, "avg_run_s": 500.0, "p50_jct_s": avg_jct, "p95_jct_s": p99_jct, "p99_jct_s": p99_jct,
        "utilization": util, "utilization_arrivals": util,
        "avg_queue_s": per(waits), "p99_queue_s": per((premium_p99, 0, 0)), "max_queue_s": per((0, 0, 0)),
        "avg_jct_s_per_tier": per((0, 0, 0)), "p99_jct_s_per_tier": per((0, 0, 0)),
        "avg_queue_s_one_device": per(waits_one or waits), "avg_queue_s_gangs": per(waits_gangs or (0, 0, 0)),
        "jobs_per_tier": per(jobs), "gangs_per_tier": per(gangs),
        "offered_load": 0.9, "offered_load_per_tier": per((premium_load, 0.2, 0.2)),
        "offered_load_pinned_per_tier": {"premium": pinned or {}},
        "actions": {a: {"count": 0, "stalled_gpu_s": 0, "redone_gpu_s": 0} for a in ("preemption", "migration", "resize")},
        "rejected_proposals": 0, "unschedulable": 0, "workload_copies": 1,
    }


def run(name="16x8-0.9", **orrery):
    baselines = {"fifo": result("fifo", avg_jct=3000, waits=(50, 50, 50)),
                 "tiresias": result("tiresias", avg_jct=1100, p99_jct=6000, waits=(20, 20, 20)),
                 "afs": result("afs", avg_jct=1000, p99_jct=5000, waits=(10, 10, 10))}
    return {"run": name, "args": ["--fleet-gen", "16x8"], "wall_s": 1.0, "notes": [],
            "results": dict(baselines, orrery=result("orrery", **orrery))}


class Judge(unittest.TestCase):
    def judge(self, **orrery):
        return bench.judge(run(**orrery), 0.75)

    def test_best_baseline_is_the_lowest_average_jct(self):
        r = self.judge(avg_jct=800)
        self.assertEqual(r["vs_best_baseline"]["best_baseline"], "afs")
        self.assertAlmostEqual(r["vs_best_baseline"]["avg_jct"], 0.8)
        self.assertAlmostEqual(r["vs_best_baseline"]["avg_jct_floor"], 0.5)

    def test_avg_jct_needs_085_and_the_utilization(self):
        self.assertTrue(self.judge(avg_jct=850)["goals"]["avg_jct"])
        self.assertIs(self.judge(avg_jct=851)["goals"]["avg_jct"], False)
        self.assertIs(self.judge(avg_jct=800, util=0.79)["goals"]["avg_jct"], False)

    def test_p99_jct_no_worse_than_the_best_baselines(self):
        self.assertTrue(self.judge(p99_jct=5000)["goals"]["p99_jct"])
        self.assertIs(self.judge(p99_jct=5001)["goals"]["p99_jct"], False)
        self.assertAlmostEqual(self.judge(p99_jct=4000)["vs_best_baseline"]["p99_jct"], 0.8)

    def test_premium_p99_only_where_premium_fits_its_share(self):
        self.assertTrue(self.judge(premium_p99=300)["goals"]["premium_p99"])
        self.assertIs(self.judge(premium_p99=301)["goals"]["premium_p99"], False)
        self.assertIs(self.judge(premium_p99=301, premium_load=0.75)["goals"]["premium_p99"], False)  # fits at the share
        self.assertIsNone(self.judge(premium_p99=301, premium_load=0.76)["goals"]["premium_p99"])
        self.assertIsNone(self.judge(premium_p99=301, pinned={"A10": 0.76})["goals"]["premium_p99"])
        self.assertIs(self.judge(premium_p99=301, pinned={"A10": 0.75})["goals"]["premium_p99"], False)
        r = self.judge(premium_p99=301, pinned={"A10": 3.0, "V100M16": 0.1})
        self.assertIsNone(r["goals"]["premium_p99"])
        self.assertEqual(r["premium_over_share"], {"A10": 3.0})

    def test_tier_order(self):
        self.assertTrue(self.judge(waits=(1, 1, 1))["goals"]["tier_order"])
        self.assertIs(self.judge(waits=(2, 1, 3))["goals"]["tier_order"], False)
        self.assertIs(self.judge(waits=(1, 3, 2))["goals"]["tier_order"], False)

    def test_tier_order_by_size_is_a_diagnostic(self):
        r = self.judge(waits=(1, 30, 2), jobs=(10, 10, 10), gangs=(0, 5, 0), waits_one=(1, 2, 2),
                       waits_gangs=(0, 58, 0))
        self.assertIs(r["goals"]["tier_order"], False)
        self.assertTrue(r["diagnostics"]["tier_order_one_device"])
        self.assertIsNone(r["diagnostics"]["tier_order_gangs"])  # one tier has gangs
        self.assertIs(self.judge(waits_one=(3, 2, 1))["diagnostics"]["tier_order_one_device"], False)

    def test_queues_form_only_at_load_11_and_needs_waits_that_differ(self):
        self.assertNotIn("queues_form", self.judge()["goals"])
        r = bench.judge(run("cluster-1.1"), 0.75)
        self.assertTrue(r["goals"]["queues_form"])
        same = run("cluster-1.1")
        same["results"]["orrery"]["avg_queue_s"] = dict(same["results"]["tiresias"]["avg_queue_s"])
        self.assertIs(bench.judge(same, 0.75)["goals"]["queues_form"], False)
        # Waits that differ by less than 1 % are the same; by 2 %, different.
        close = run("cluster-1.1")
        close["results"]["orrery"]["avg_queue_s"] = dict(zip(TIERS, (20.1, 20.1, 20.1)))
        self.assertIs(bench.judge(close, 0.75)["goals"]["queues_form"], False)
        close["results"]["orrery"]["avg_queue_s"] = dict(zip(TIERS, (20.4, 20.4, 20.4)))
        self.assertTrue(bench.judge(close, 0.75)["goals"]["queues_form"])
        idle = run("cluster-1.1")
        idle["results"]["fifo"]["avg_queue_s"] = dict(zip(TIERS, (0, 0, 0)))
        self.assertIs(bench.judge(idle, 0.75)["goals"]["queues_form"], False)

    def test_average_wait_weighs_tiers_by_their_jobs(self):
        r = result("x", waits=(10, 20, 40), jobs=(1, 1, 2))
        self.assertAlmostEqual(bench.avg_wait(r), (10 + 20 + 80) / 4)


class WholeRun(unittest.TestCase):
    """bench-sim --quick (--json, --variants) against a stand-in that prints the same results for every run."""

    def bench(self, d, *args):
        """bench-sim with a stand-in orrery-sim in `d` that prints the same results for every run."""
        fixed = [run(avg_jct=800, p99_jct=6000)["results"][p] for p in ("fifo", "tiresias", "afs", "orrery")]
        with open(os.path.join(d, "results.json"), "w") as f:
            json.dump(fixed, f)
        sim = os.path.join(d, "fake-sim")
        with open(sim, "w") as f:
            f.write(f"#!/bin/sh\ncat '{d}/results.json'\n")
        os.chmod(sim, 0o755)
        with open(os.path.join(d, "openb_pod_list_default.csv"), "w") as f:  # what trace-variant reads
            f.write("name,num_gpu,gpu_milli,gpu_spec,creation_time\npod-0,1,1000,,0\npod-1,8,1000,,5\n")
        open(os.path.join(d, "openb_node_list_gpu_node.csv"), "w").close()
        env = dict(os.environ, ORRERY_SIM=sim, ORRERY_TRACE_DIR=d)
        p = subprocess.run([sys.executable, BENCH, *args], env=env, capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_variants_run_the_same_runs_on_seven_traces_and_sum_them_up(self):
        with tempfile.TemporaryDirectory() as d:
            out = json.loads(self.bench(d, "--quick", "--json", "--variants"))
            self.assertEqual(list(out["variants"]), [f"v{i}" for i in range(1, 8)])
            self.assertEqual(out["variants"]["v4"]["trace_variant_args"],
                             ["--spec-share", "0.4", "--share-share", "0.3", "--seed", "4"])
            for v in out["variants"].values():
                self.assertEqual(len(v["runs"]), 5)
                self.assertEqual(v["goals_met"]["avg_jct"], "5 of 5")
            self.assertEqual(out["goals_met"]["p99_jct"], "0 of 5")  # the default trace's, as without it
            self.assertEqual(out["all_traces"]["goals_met"]["avg_jct"], "40 of 40")
            self.assertEqual(out["all_traces"]["goals_met"]["queues_form"], "8 of 8")
            self.assertAlmostEqual(out["all_traces"]["geomean_vs_best_baseline"]["p99_jct"], 1.2)
            text = self.bench(d, "--quick", "--variants")
            self.assertIn("== variant v7 (scripts/trace-variant --spec-share 0.3 --share-share 0.6 --seed 7)", text)
            self.assertIn("all traces: goals met (runs where they apply): avg_jct 40 of 40, p99_jct 0 of 40", text)

    def test_summary_counts_the_runs_that_meet_each_goal(self):
        with tempfile.TemporaryDirectory() as d:
            out = json.loads(self.bench(d, "--quick", "--json"))
            self.assertNotIn("variants", out)
            self.assertEqual([r["run"] for r in out["runs"]],
                             ["cluster-0.7", "cluster-0.9", "cluster-1.1", "16x8-0.9", "4x8-0.9"])
            self.assertEqual(out["goals_met"]["avg_jct"], "5 of 5")
            self.assertEqual(out["goals_met"]["p99_jct"], "0 of 5")
            self.assertEqual(out["goals_met"]["tier_order"], "5 of 5")
            self.assertEqual(out["goals_met"]["queues_form"], "1 of 1")
            # Every run the same: orrery / AFS is 0.8 in average JCT and 1.2 in p99 JCT.
            self.assertAlmostEqual(out["geomean_vs_best_baseline"]["avg_jct"], 0.8)
            self.assertAlmostEqual(out["geomean_vs_best_baseline"]["p99_jct"], 1.2)


class Geomean(unittest.TestCase):
    def test_geometric_mean_of_the_ratios_that_exist(self):
        self.assertAlmostEqual(bench.geomean([0.5, 2.0]), 1.0)
        self.assertAlmostEqual(bench.geomean([1.1, None, 1.1]), 1.1)
        self.assertAlmostEqual(bench.geomean([0.9, 1.0, 1.21]), (0.9 * 1.21) ** (1 / 3))
        self.assertIsNone(bench.geomean([None]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
