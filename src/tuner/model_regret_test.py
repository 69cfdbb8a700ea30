"""braid-model-regret on the sample sweep of tests/data/model-regret: it must exit 0 and print its
table: the model's description, one row per size of the sweep (with --verbose, one line per
measured algorithm under each), then the summary. The figures depend on this host's topology, so
only the shape is checked.

usage: model_regret_test.py BRAID_MODEL_REGRET DATA_DIR
"""

import json
import os
import re
import subprocess
import sys
import unittest

ROW = re.compile(r"^n=(\d+) +(\d+) B  chose (\S+) +\((\S+) (\d+) x(\d+)\) regret +(-?\d+\.\d)%"
                 r"  fastest (\S+) +(\d+\.\d\d) us$")
DETAIL = re.compile(r"^      (\S+) +(\d+) x(\d+) measured +(\d+\.\d\d) us  model +(-?\d+\.\d\d) us"
                    r"  \(model/measured (\d+\.\d\d)\)$")
SUMMARY = re.compile(r"^(\S+) n=(\d+) model regret over (\d+) sizes: geometric mean (\d+\.\d)%, "
                     r"max (\d+\.\d)% \((\d+) B\); fastest chosen at (\d+)$")


class ModelRegretTable(unittest.TestCase):
    program = ""
    data = ""

    @classmethod
    def setUpClass(cls):
        # What the table must show, read from the sweep itself.
        with open(os.path.join(cls.data, "allreduce_n3.json")) as f:
            sweep = json.load(f)
        cls.nranks = sweep["nranks"]
        cls.sizes = sorted({m["size"] for m in sweep["measurements"]})
        cls.algorithms = sorted({m["algorithm"] for m in sweep["measurements"]})

    def run_tool(self, *extra):
        args = [self.program, "--calibration", os.path.join(self.data, "calibration.txt"),
                *extra, os.path.join(self.data, "allreduce_n3.json")]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)

    def check_rows(self, rows):
        self.assertEqual([int(r.group(2)) for r in rows], self.sizes)
        for r in rows:
            self.assertEqual(int(r.group(1)), self.nranks)
            self.assertIn(r.group(3), self.algorithms)  # chose
            self.assertIn(r.group(4), ("model", "table", "BRAID_ALGO", "fixed"))
            self.assertGreaterEqual(float(r.group(7)), 0.0)  # regret
            self.assertIn(r.group(8), self.algorithms)  # fastest

    def check_summary(self, line, rows):
        s = SUMMARY.match(line)
        self.assertIsNotNone(s, line)
        self.assertEqual(s.group(1), "allreduce")
        self.assertEqual(int(s.group(2)), self.nranks)
        self.assertEqual(int(s.group(3)), len(self.sizes))
        self.assertIn(int(s.group(6)), self.sizes)
        zero = sum(1 for r in rows if float(r.group(7)) == 0.0)
        self.assertEqual(int(s.group(7)), zero)

    def test_table(self):
        done = self.run_tool()
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = done.stdout.splitlines()
        self.assertTrue(lines[0].startswith(f"# n={self.nranks}: {self.nranks} ranks on "), lines[0])
        rows = [ROW.match(line) for line in lines[1:-1]]
        self.assertTrue(all(rows), "\n".join(lines[1:-1]))
        self.check_rows(rows)
        self.check_summary(lines[-1], rows)

    def test_verbose_table(self):
        done = self.run_tool("--verbose")
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = done.stdout.splitlines()
        rows = []
        for line in lines[1:-1]:
            row = ROW.match(line)
            if row:
                rows.append((row, []))
                continue
            detail = DETAIL.match(line)
            self.assertIsNotNone(detail, line)
            self.assertTrue(rows, line)
            rows[-1][1].append(detail.group(1))
        self.check_rows([r for r, _ in rows])
        for _, measured in rows:
            self.assertEqual(measured, self.algorithms)
        self.check_summary(lines[-1], [r for r, _ in rows])

    def test_usage(self):
        done = subprocess.run([self.program], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 2)
        self.assertIn("usage:", done.stderr)


if __name__ == "__main__":
    ModelRegretTable.program, ModelRegretTable.data = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
