#!/usr/bin/env python3
"""The unity build's batch files (cmake/ProfctlUnity.cmake), and scripts/unity_compdb.py and
scripts/tidy_affected.py over them.

UnityCompdbTest: a real (tiny) ninja build: one batch object including a.cc and b.cc (b.cc
includes h.h) and c.cc on its own. The expanded database must list each source with its batch's
flags, and a change to h.h must select both sources of the batch (their object depends on it) and
not c.cc.
UnityBatchesTest: a tiny CMake project batched by profctl_unity_batches(), configured at two
paths: the batch files must be the same bytes (ccache's direct mode hits for a clone at another
path), name sources relative to themselves, hold a generated source, leave a PROFCTL_UNITY OFF
target alone, and build.
BuildFolderTest: the real build folder (PROFCTL_BUILD_DIR, set by CTest) holds nothing that ties
an object to where the clone sits: no compile definition with the source or build folder's path
in it (tests find paths at run time, tests/build_paths.h) and no batch naming a source by an
absolute path. ccache rewrites -I paths under its base_dir, not the text of a definition.
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts")


class UnityCompdbTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="unity_compdb_test.")
        self.addCleanup(shutil.rmtree, self.root)
        files = {
            "h.h": "inline int H() { return 1; }\n",
            "a.cc": "int A() { return 2; }\n",
            "b.cc": '#include "h.h"\nint B() { return H(); }\n',
            "c.cc": "int C() { return 3; }\n",
        }
        for name, text in files.items():
            with open(os.path.join(self.root, name), "w") as f:
                f.write(text)
        self.build = os.path.join(self.root, "build")
        unity_dir = os.path.join(self.build, "unity")
        os.makedirs(unity_dir)
        self.batch = os.path.join(unity_dir, "t_0.cc")
        with open(self.batch, "w") as f:
            f.write("// profctl unity batch of t (cmake/ProfctlUnity.cmake)\n")
            for src in ("a.cc", "b.cc"):
                f.write('#include "../../%s"\n' % src)
        cxx = shutil.which("c++") or shutil.which("g++")
        if cxx is None:
            self.skipTest("no C++ compiler")
        with open(os.path.join(self.build, "build.ninja"), "w") as f:
            f.write("rule cxx\n  command = %s -I%s -MD -MF $out.d -c $in -o $out\n"
                    "  depfile = $out.d\n  deps = gcc\n" % (cxx, self.root))
            f.write("build unity/t_0.cc.o: cxx %s\n" % self.batch)
            f.write("build c.o: cxx %s\n" % os.path.join(self.root, "c.cc"))
        subprocess.run(["ninja", "-C", self.build], check=True, capture_output=True)
        self.flags = "-DBATCH_FLAG=1 -I" + self.root
        commands = [
            {"directory": self.build, "file": self.batch,
             "command": "c++ %s -o unity/t_0.cc.o -c %s" % (self.flags, self.batch)},
            {"directory": self.build, "file": os.path.join(self.root, "c.cc"),
             "command": "c++ -o c.o -c %s" % os.path.join(self.root, "c.cc")},
        ]
        with open(os.path.join(self.build, "compile_commands.json"), "w") as f:
            json.dump(commands, f)

    def expand(self):
        subprocess.run([sys.executable, os.path.join(SCRIPTS, "unity_compdb.py"), self.build],
                       check=True)
        with open(os.path.join(self.build, "compdb", "compile_commands.json")) as f:
            return json.load(f)

    def test_each_source_of_a_batch_gets_the_batchs_flags(self):
        entries = self.expand()
        by_file = {os.path.basename(e["file"]): e for e in entries}
        self.assertEqual(sorted(by_file), ["a.cc", "b.cc", "c.cc"])
        for name in ("a.cc", "b.cc"):
            command = by_file[name]["command"]
            self.assertIn(self.flags, command)
            self.assertIn("-c " + os.path.join(self.root, name), command)
            self.assertEqual(by_file[name]["file"], os.path.join(self.root, name))
            self.assertNotIn("t_0.cc ", command + " ")
            self.assertEqual(by_file[name]["output"], "unity/t_0.cc.o")
        self.assertNotIn("BATCH_FLAG", by_file["c.cc"]["command"])

    def test_a_changed_header_selects_every_source_of_the_batch_that_includes_it(self):
        self.expand()
        sources = os.path.join(self.root, "sources.txt")
        with open(sources, "w") as f:
            f.write("a.cc\nb.cc\nc.cc\n")
        out = subprocess.run(
            [sys.executable, os.path.join(SCRIPTS, "tidy_affected.py"), "build", sources],
            input="h.h\n", capture_output=True, text=True, check=True, cwd=self.root).stdout
        self.assertEqual(out.split(), ["a.cc", "b.cc"])
        out = subprocess.run(
            [sys.executable, os.path.join(SCRIPTS, "tidy_affected.py"), "build", sources],
            input="c.cc\n", capture_output=True, text=True, check=True, cwd=self.root).stdout
        self.assertEqual(out.split(), ["c.cc"])


ROOT = os.path.normpath(os.path.join(SCRIPTS, ".."))
PROJECT = """cmake_minimum_required(VERSION 3.22)
project(t LANGUAGES CXX)
set(PROFCTL_UNITY_BUILD ON)
set(PROFCTL_UNITY_BATCH_SIZE 2)
include(%s/cmake/ProfctlUnity.cmake)
add_custom_command(OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/gen.cc
  COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_SOURCE_DIR}/gen.in
          ${CMAKE_CURRENT_BINARY_DIR}/gen.cc
  DEPENDS gen.in VERBATIM)
add_library(lib STATIC a.cc b.cc ${CMAKE_CURRENT_BINARY_DIR}/gen.cc)
add_executable(apart main.cc)
target_link_libraries(apart lib)
set_target_properties(apart PROPERTIES PROFCTL_UNITY OFF)
%s
profctl_unity_batches()
""" % (ROOT, "%s")
SOURCES = {
    "a.cc": "int A() { return 1; }\n",
    "b.cc": "int B() { return 2; }\n",
    "gen.in": "int G() { return 3; }\n",
    "main.cc": "int A(); int B(); int G();\nint main() { return A() + B() + G() == 6 ? 0 : 1; }\n",
}


class UnityBatchesTest(unittest.TestCase):
    def setUp(self):
        if shutil.which("cmake") is None or shutil.which("ninja") is None:
            self.skipTest("no cmake or ninja")
        self.tmp = tempfile.mkdtemp(prefix="unity_batches_test.")
        self.addCleanup(shutil.rmtree, self.tmp)

    def project(self, name, extra=""):
        """Writes the project at TMP/NAME/src; returns that folder."""
        src = os.path.join(self.tmp, name, "src")
        os.makedirs(src)
        for file, text in SOURCES.items():
            with open(os.path.join(src, file), "w") as f:
                f.write(text)
        with open(os.path.join(src, "CMakeLists.txt"), "w") as f:
            f.write(PROJECT % extra)
        return src

    def configure(self, src):
        return subprocess.run(["cmake", "-S", src, "-B", os.path.join(src, "build"), "-G", "Ninja",
                               "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"],
                              capture_output=True, text=True)

    def batches(self, src):
        unity = os.path.join(src, "build", "unity")
        out = {}
        for name in sorted(os.listdir(unity)):
            with open(os.path.join(unity, name), "rb") as f:
                out[name] = f.read()
        return out

    def test_batches_are_the_same_bytes_at_any_path_and_build(self):
        first, second = self.project("one"), self.project("another/clone")
        for src in (first, second):
            result = self.configure(src)
            self.assertEqual(result.returncode, 0, result.stderr)
        batches = self.batches(first)
        self.assertEqual(sorted(batches), ["lib_0.cc", "lib_1.cc"])
        self.assertEqual(batches, self.batches(second))
        self.assertEqual(batches["lib_0.cc"].decode().splitlines()[1:],
                         ['#include "../../a.cc"', '#include "../../b.cc"'])
        self.assertEqual(batches["lib_1.cc"].decode().splitlines()[1:], ['#include "../gen.cc"'])
        with open(os.path.join(first, "build", "compile_commands.json")) as f:
            files = sorted(os.path.relpath(e["file"], first) for e in json.load(f))
        self.assertEqual(files, ["build/unity/lib_0.cc", "build/unity/lib_1.cc", "main.cc"])
        build = subprocess.run(["ninja", "-C", os.path.join(first, "build")],
                               capture_output=True, text=True)
        self.assertEqual(build.returncode, 0, build.stdout + build.stderr)
        self.assertEqual(subprocess.run([os.path.join(first, "build", "apart")]).returncode, 0)

    def test_a_build_folder_reached_through_a_symbolic_link_builds(self):
        # CMake keeps the link's path; the compiler resolves ".." physically.
        src = self.project("one")
        real = os.path.join(self.tmp, "elsewhere", "deeper", "build")
        os.makedirs(real)
        os.symlink(real, os.path.join(src, "build"))
        result = self.configure(src)
        self.assertEqual(result.returncode, 0, result.stderr)
        build = subprocess.run(["ninja", "-C", os.path.join(src, "build")],
                               capture_output=True, text=True)
        self.assertEqual(build.returncode, 0, build.stdout + build.stderr)

    def test_an_unchanged_batch_is_not_written_again(self):
        src = self.project("one")
        self.assertEqual(self.configure(src).returncode, 0)
        batch = os.path.join(src, "build", "unity", "lib_0.cc")
        before = os.stat(batch).st_mtime_ns
        os.utime(batch, ns=(before - 10**9, before - 10**9))
        self.assertEqual(self.configure(src).returncode, 0)
        self.assertEqual(os.stat(batch).st_mtime_ns, before - 10**9)

    def test_a_source_both_batched_and_apart_in_one_folder_is_an_error(self):
        src = self.project("one", "add_executable(also a.cc main.cc)\n"
                                  "set_target_properties(also PROPERTIES PROFCTL_UNITY OFF)")
        result = self.configure(src)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("/a.cc is compiled both in a batch and on its own",
                      " ".join(result.stderr.split()))


def absolute_path_definitions(commands, folders):
    """The (file, argument) of every -D argument whose value holds one of `folders`."""
    found = []
    for c in commands:
        args = c.get("arguments") or shlex.split(c["command"])
        for a in args:
            if a.startswith("-D") and any(f in a for f in folders):
                found.append((c["file"], a))
    return found


class BuildFolderTest(unittest.TestCase):
    def test_the_checker_finds_a_definition_with_a_path(self):
        commands = [{"file": "a.cc", "command": "c++ -I/src/x -DNAME=1 -c a.cc"},
                    {"file": "b.cc", "command": 'c++ -DDATA=\\"/src/tests/data\\" -c b.cc'}]
        self.assertEqual([f for f, _ in absolute_path_definitions(commands, ["/src"])], ["b.cc"])

    def test_the_build_ties_no_object_to_the_clones_path(self):
        build = os.environ.get("PROFCTL_BUILD_DIR")
        if not build:
            self.skipTest("PROFCTL_BUILD_DIR not set (CTest sets it)")
        with open(os.path.join(build, "compile_commands.json")) as f:
            commands = json.load(f)
        folders = [os.path.realpath(ROOT), os.path.realpath(build)]
        self.assertEqual(absolute_path_definitions(commands, folders), [],
                         "a compile definition holds this clone's path: its objects miss ccache "
                         "in a clone elsewhere (find the path at run time: tests/build_paths.h)")
        for c in commands:
            path = os.path.join(c["directory"], c["file"])
            with open(path, errors="replace") as f:
                first = f.readline()
                if not first.startswith("// profctl unity batch"):
                    continue
                for line in f:
                    self.assertFalse(line.startswith('#include "/'), "%s: %s" % (path, line))


if __name__ == "__main__":
    unittest.main()
