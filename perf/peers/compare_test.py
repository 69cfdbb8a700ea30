"""Tests of compare.py's pure parts: sizes, placement choice, tables, commands.

Run: python3 -m unittest discover -s perf/peers -p 'compare_test.py'
"""

import argparse
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def measurement(size, in_place, busbw, time_us, wrong=0):
    return {"size": size, "in_place": in_place, "busbw": busbw, "time_us": time_us,
            "wrong": wrong}


class SizeTest(unittest.TestCase):
    def test_parse_size_reads_binary_suffixes(self):
        self.assertEqual(compare.parse_size("8"), 8)
        self.assertEqual(compare.parse_size("64K"), 64 << 10)
        self.assertEqual(compare.parse_size("256m"), 256 << 20)
        self.assertEqual(compare.parse_size("1GB"), 1 << 30)

    def test_parse_size_rejects_garbage(self):
        with self.assertRaises(argparse.ArgumentTypeError):
            compare.parse_size("lots")
        with self.assertRaises(argparse.ArgumentTypeError):
            compare.parse_size("1.5M")

    def test_size_text_uses_the_largest_exact_unit(self):
        self.assertEqual(compare.size_text(8), "8 B")
        self.assertEqual(compare.size_text(65536), "64 KB")
        self.assertEqual(compare.size_text(256 << 20), "256 MB")
        self.assertEqual(compare.size_text(65532), "65532 B")


class SegmentTest(unittest.TestCase):
    def test_sizes_under_the_limit_run_apart(self):
        self.assertEqual(compare.size_segments(8, 256 << 20, 2, 64 << 10),
                         [(8, 32 << 10), (64 << 10, 256 << 20)])
        self.assertEqual(compare.size_segments(64, 256 << 20, 4, 64 << 10),
                         [(64, 16 << 10), (64 << 10, 256 << 20)])

    def test_one_segment_when_every_size_falls_on_one_side(self):
        self.assertEqual(compare.size_segments(8, 1024, 2, 64 << 10), [(8, 1024)])
        self.assertEqual(compare.size_segments(1 << 20, 16 << 20, 4, 64 << 10),
                         [(1 << 20, 16 << 20)])
        self.assertEqual(compare.size_segments(8, 1 << 20, 2, 0), [(8, 1 << 20)])


class PickTest(unittest.TestCase):
    ms = [measurement(8, False, 0.01, 3.0), measurement(8, True, 0.02, 1.5),
          measurement(1024, False, 2.0, 1.0), measurement(1024, True, 1.0, 2.0, wrong=3)]

    def test_best_takes_the_higher_busbw_and_counts_every_wrong_value(self):
        picked = compare.pick(self.ms, "best")
        self.assertEqual(picked[8]["time_us"], 1.5)
        self.assertTrue(picked[8]["in_place"])
        self.assertEqual(picked[1024]["busbw"], 2.0)
        self.assertEqual(picked[1024]["wrong"], 3)

    def test_out_and_in_keep_one_placement(self):
        self.assertEqual(compare.pick(self.ms, "out")[8]["time_us"], 3.0)
        self.assertEqual(compare.pick(self.ms, "in")[1024]["busbw"], 1.0)


class TableTest(unittest.TestCase):
    def test_one_column_per_library_and_a_latency_row(self):
        libs = [compare.Library("a", "Lib A", ["allreduce"], None),
                compare.Library("b", "Lib B", ["allreduce"], None)]
        runs = [
            {"library": "a", "collective": "allreduce", "nranks": 2, "status": 0,
             "status_text": "ok",
             "measurements": [measurement(8, False, 0.0, 2.5), measurement(8, True, 0.0, 2.0),
                              measurement(1 << 20, False, 5.0, 400.0)]},
            {"library": "b", "collective": "allreduce", "nranks": 2, "status": 1,
             "status_text": "WRONG VALUES (see log)",
             "measurements": [measurement(8, False, 0.0, 1500.0, wrong=1),
                              measurement(1 << 20, False, 1.25, 900.0)]},
        ]
        text = compare.markdown_tables(runs, libs, "best")
        self.assertIn("### allreduce, n = 2: busbw (GB/s)", text)
        self.assertIn("| size | Lib A | Lib B |", text)
        self.assertIn("| 1 MB | 5.00 | 1.25 |", text)
        self.assertIn("| 8 B | 0.00 | 0.00 (!) |", text)
        self.assertIn("| **time at 8 B** | 2.00 us | 1.50 ms |", text)
        self.assertIn("- Lib B: WRONG VALUES (see log)", text)

    def test_a_librarys_small_and_large_runs_make_one_table(self):
        libs = [compare.Library("a", "Lib A", ["allreduce"], None)]
        runs = [
            {"library": "a", "collective": "allreduce", "nranks": 4, "status": 0,
             "status_text": "ok", "cpu_others_during": 0.5,
             "measurements": [measurement(8, False, 0.0, 7.0)]},
            {"library": "a", "collective": "allreduce", "nranks": 4, "status": 0,
             "status_text": "ok", "cpu_others_during": 0.0,
             "measurements": [measurement(1 << 20, False, 3.5, 300.0)]},
        ]
        text = compare.markdown_tables(runs, libs, "best")
        self.assertEqual(text.count("### allreduce, n = 4"), 1)
        self.assertIn("| 8 B | 0.00 |", text)
        self.assertIn("| 1 MB | 3.50 |", text)
        self.assertIn("| **time at 8 B** | 7.00 us |", text)
        self.assertEqual(text.count("other processes took 50%"), 1)


class CommandTest(unittest.TestCase):
    def test_gloo_runs_in_a_quickack_namespace_with_its_algorithm(self):
        lib = compare.gloo_library("/b", "ring", netns=True)
        argv = lib.command("allreduce", 4, ["-b", "8"], "/o.json")
        self.assertEqual(argv[:2], ["unshare", "-n"])
        self.assertIn("quickack 1", argv[4])
        self.assertEqual(argv[argv.index("/b/perf/peers/braid-peer-gloo") + 1:],
                         ["allreduce", "--np", "4", "--algo", "ring", "-b", "8",
                          "--json", "/o.json"])
        self.assertEqual(lib.collectives, ["allreduce"])

    def test_braid_shared_allocates_its_buffers_with_braid_mem_alloc(self):
        plain = compare.braid_library("/b").command("alltoall", 4, ["-b", "8"], "/o.json")
        shared = compare.braid_library("/b", shared=True)
        argv = shared.command("alltoall", 4, ["-b", "8"], "/o.json")
        self.assertNotIn("-R", plain)
        self.assertEqual(argv, ["/b/perf/braid-perf", "alltoall", "--np", "4", "-R", "1",
                                "-b", "8", "--json", "/o.json"])
        self.assertEqual(shared.key, "braid-shared")

    def test_gloo_default_measures_every_collective_without_algo(self):
        lib = compare.gloo_library("/b", "default", netns=False)
        argv = lib.command("broadcast", 4, [], "/o.json")
        self.assertEqual(argv[0], "/b/perf/peers/braid-peer-gloo")
        self.assertNotIn("--algo", argv)
        self.assertIn("broadcast", lib.collectives)


if __name__ == "__main__":
    unittest.main()
