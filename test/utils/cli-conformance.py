#!/usr/bin/env python3
"""cli-conformance.py --build-dir BUILD --source-dir REPO: the command-line contract under
hostile inputs (docs/cli.md, "Exit codes" and "How outputs are written"; issue 17).

Every subcommand (compile, kernels, env build/inspect/verify/merge/diff/prune/sign, tune,
devices, --version, cubecc-opt; key files as inputs of env sign and env verify --key) runs against the same hostile inputs, outputs and standard outputs:

  inputs   missing, unreadable (skipped as root: root reads a mode-000 file), a directory, a FIFO,
           a symbolic link to /dev/full and to /dev/zero, links (to a good file, dangling, a
           loop), a path over PATH_MAX, a name over NAME_MAX, truncated, empty and garbage files
           (binary and text), a kernel name of 10 MB; over-long option values; unknown options
  outputs  a link to /dev/full inside the scratch folder, a directory, a FIFO, a missing folder,
           links (to a file, dangling, a loop), /dev/null, a path over PATH_MAX, a name over
           NAME_MAX, a full small filesystem (a tmpfs in a private mount namespace: skipped with a
           message where this process may not make one)
  stdout   /dev/full, a closed descriptor

and every run must: exit with the documented code (0, 1 or 2; never 3, never a signal), within
its timeout (a hang fails instead of blocking), with no sanitizer report and a bounded stderr;
leave no partial or 0-byte output file, the old file as it was when it fails, every symbolic
link a link to the same target, no temporary file behind, and /dev/full and /dev/null devices.
Cases run 4 at a time; the whole script takes well under a minute under ASan.
"""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time

TIMEOUT = 30  # seconds, per command
MAX_STDERR = 64 << 10
SANITIZER = re.compile(r"ERROR: AddressSanitizer|AddressSanitizer:DEADLYSIGNAL|ERROR: LeakSanitizer|"
                       r"runtime error:|ThreadSanitizer")
TEMPORARY = re.compile(r"^\..*\.\d+\.\d+\.[0-9a-f]{16}\.tmp$")

# Cases whose fix belongs to another part of cubecc than the command line; listed with the reason,
# reported as XFAIL while they fail and as "now passes" once that fix is in (then remove them).
KNOWN_ELSEWHERE: dict[str, str] = {}


class Suite:
    def __init__(self, build, repo, scratch):
        self.cubecc = os.path.join(build, "tools", "cubecc")
        self.opt = os.path.join(build, "tools", "cubecc-opt")
        self.lib = os.path.join(build, "examples", "libcubecc_examples.so")
        self.repo = repo
        self.scratch = scratch
        self.fixtures = os.path.join(scratch, "fixtures")
        self.lock = threading.Lock()
        self.failures = []
        self.xfails = []
        self.now_passing = []
        self.skips = []
        self.runs = 0
        self.times = []
        self.env = dict(os.environ, MESA_SHADER_CACHE_DISABLE="true", LC_ALL="C")
        self.env.pop("CUBECC_ENV", None)
        self.env.pop("CUBECC_LOG", None)

    # --- fixtures ---------------------------------------------------------------------------------

    def make_fixtures(self):
        f = self.fixtures
        os.makedirs(f)
        rng = random.Random(17)
        axpy = open(os.path.join(self.repo, "examples", "ir", "axpy.cir"), "rb").read()
        lib = open(self.lib, "rb").read()
        write = lambda name, data: open(os.path.join(f, name), "wb").write(data)
        write("good.cir", axpy)
        shutil.copy(self.lib, os.path.join(f, "good.so"))
        code, _, err = self.run([self.cubecc, "env", "build", os.path.join(f, "good.cir"),
                                 "--target", "interp", "-o", os.path.join(f, "good.cubeenv")])
        if code != 0:
            sys.exit("cli-conformance: cannot build the fixture bundle:\n" + err)
        bundle = open(os.path.join(f, "good.cubeenv"), "rb").read()
        # A key pair (good.key, good.pub) and the bundle signed with it, for env sign and verify.
        for argv in ([self.cubecc, "env", "keygen", "-o", os.path.join(f, "good")],
                     [self.cubecc, "env", "sign", os.path.join(f, "good.cubeenv"), "--key",
                      os.path.join(f, "good.key"), "-o", os.path.join(f, "signed.cubeenv")]):
            code, _, err = self.run(argv)
            if code != 0:
                sys.exit("cli-conformance: cannot make the fixture key or signed bundle:\n" + err)
        keys = {ext: open(os.path.join(f, "good." + ext), "rb").read() for ext in ("key", "pub")}
        good = {"cir": axpy, "so": lib, "cubeenv": bundle, **keys}
        text = axpy.decode()
        for ext, data in good.items():
            write("truncated." + ext, data[: max(len(data) // 2, 1)] if ext != "so" else data[:4096])
            write("empty." + ext, b"")
            write("garbage." + ext, bytes(rng.getrandbits(8) for _ in range(4096)))
            write("text." + ext, "".join(rng.choice("abc{}()%@:=, \n\"") for _ in range(4096)).encode())
            os.mkdir(os.path.join(f, "dir." + ext))
            os.mkfifo(os.path.join(f, "fifo." + ext))
            os.symlink("/dev/full", os.path.join(f, "devfull." + ext))
            os.symlink("/dev/zero", os.path.join(f, "devzero." + ext))
            os.symlink("good." + ext, os.path.join(f, "link." + ext))
            os.symlink("nowhere." + ext, os.path.join(f, "dangling." + ext))
            os.symlink("loopb." + ext, os.path.join(f, "loopa." + ext))
            os.symlink("loopa." + ext, os.path.join(f, "loopb." + ext))
            write("unreadable." + ext, data)
            os.chmod(os.path.join(f, "unreadable." + ext), 0)
            if ext == "key":  # as keygen writes them: so that their contents are what is refused
                for name in ("truncated", "empty", "garbage", "text"):
                    os.chmod(os.path.join(f, f"{name}.key"), 0o600)
        # 1 MiB: over the limit (64 KiB) many times; test/lit/tools/cubecc-hardening.test has 10 MB.
        write("hugename.cir", text.replace("@axpy", "@" + "k" * (1 << 20)).encode())
        write("good.cpp", open(os.path.join(self.repo, "examples", "kernels", "axpy.cpp"), "rb").read())
        os.mkdir(os.path.join(f, "dir.cpp"))
        os.mkfifo(os.path.join(f, "fifo.cpp"))
        os.symlink("/dev/zero", os.path.join(f, "devzero.cpp"))

    def inputs(self, ext):
        """(name, path, expected exit code) of every hostile input of one kind."""
        f = self.fixtures
        names = ["missing", "dir", "fifo", "devfull", "devzero", "dangling", "loopa", "truncated",
                 "empty", "garbage", "text", "unreadable"]
        out = [("good", os.path.join(f, "good." + ext), 0), ("link", os.path.join(f, "link." + ext), 0)]
        for name in names:
            if name == "unreadable" and os.geteuid() == 0:
                continue  # said once in main()
            out.append((name, os.path.join(f, f"{name}.{ext}"), 1))
        out.append(("longpath", os.path.join(f, "d/" * 3000 + "x." + ext), 1))
        out.append(("longname", os.path.join(f, "n" * 300 + "." + ext), 1))
        if ext == "cir":
            out.append(("hugename", os.path.join(f, "hugename.cir"), 1))
        return out

    # --- running and checking ---------------------------------------------------------------------

    def run(self, argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, close_stdout=False,
            cwd=None):
        if close_stdout:  # (no preexec_fn: not safe with threads)
            argv = ["bash", "-c", 'exec "$@" >&-', "bash"] + argv
            stdout = None
        try:
            p = subprocess.run(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                               timeout=TIMEOUT, env=self.env, cwd=cwd)
        except subprocess.TimeoutExpired:
            return None, b"", f"(killed after {TIMEOUT} s)"
        return p.returncode, p.stdout or b"", p.stderr.decode("utf-8", "replace")

    def fail(self, case, why):
        with self.lock:
            if case in KNOWN_ELSEWHERE:
                self.xfails.append(f"{case}: {why.splitlines()[0]} [{KNOWN_ELSEWHERE[case]}]")
            else:
                self.failures.append(f"{case}: {why}")

    @staticmethod
    def snapshot(path):
        """What is at `path` now: ('link', target) / ('file', bytes) / ('other', mode) / None."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return ("link", os.readlink(path))
        if stat.S_ISREG(st.st_mode):
            return ("file", open(path, "rb").read())
        return ("other", stat.S_IFMT(st.st_mode))

    def check(self, case, argv, expect, message=None, outputs=(), folder=None, **run_args):
        """Runs one case and checks every invariant. `outputs`: paths the command may write."""
        before = {o: self.snapshot(o) for o in outputs}
        targets = {o: os.path.realpath(o) for o in outputs}
        target_before = {o: self.snapshot(t) for o, t in targets.items()}
        start = time.monotonic()
        code, _, err = self.run(argv, **run_args)
        with self.lock:
            self.runs += 1
            self.times.append((time.monotonic() - start, case))
        ok = True

        def bad(why):
            nonlocal ok
            ok = False
            self.fail(case, why + ("\n    stderr: " + err[:2000].replace("\n", "\n            ")
                                   if err else ""))

        if code is None:
            bad("hung (timeout)")
        elif code < 0 or code >= 128:
            bad(f"killed by a signal (exit {code})")
        elif SANITIZER.search(err):
            bad("a sanitizer report")
        elif code not in (0, 1, 2):
            bad(f"exit {code}: not 0, 1 or 2")
        elif code != expect:
            bad(f"exit {code}, expected {expect}")
        elif message and not re.search(message, err):
            bad(f"stderr does not match /{message}/")
        if len(err) > MAX_STDERR:
            bad(f"{len(err)} bytes on stderr")
        for o in outputs:
            now = self.snapshot(o)
            if before[o] and before[o][0] == "link" and now != before[o]:
                bad(f"{o}: the symbolic link was replaced ({now[0] if now else 'removed'})")
            t = self.snapshot(targets[o])
            if t and t[0] == "file" and not t[1]:
                bad(f"{targets[o]}: a 0-byte output file")
            if code != 0 and t != target_before[o]:
                bad(f"{targets[o]}: changed by a command that failed")
        for dev in ("/dev/full", "/dev/null"):
            if not stat.S_ISCHR(os.stat(dev).st_mode):
                bad(f"{dev} is no longer a character device")
        if folder:
            for root, dirs, files in os.walk(folder):
                for name in files:
                    if TEMPORARY.match(name):
                        bad(f"a temporary file left behind: {os.path.join(root, name)}")
        if ok and case in KNOWN_ELSEWHERE:
            with self.lock:
                self.now_passing.append(case)
        return code, err

    # --- the cases ----------------------------------------------------------------------------------

    def commands(self):
        """(name, input kinds, argv of an input and an output folder, writes a file?)."""
        c, o, f = self.cubecc, self.opt, self.fixtures
        return [
            ("compile", ("cir", "so"), lambda i, d: [c, "compile", i, "--emit", "ir", "-o", f"{d}/out.cir"], True),
            ("cubecc-opt", ("cir",), lambda i, d: [o, i, "-o", f"{d}/out.cir"], True),
            ("kernels", ("so",), lambda i, d: [c, "kernels", i, "--json"], False),
            ("env build", ("cir", "so"), lambda i, d: [c, "env", "build", i, "--target", "interp", "-o", f"{d}/out.cubeenv"], True),
            ("env inspect", ("cubeenv",), lambda i, d: [c, "env", "inspect", i, "--json"], False),
            ("env verify", ("cubeenv",), lambda i, d: [c, "env", "verify", i], False),
            ("env merge", ("cubeenv",), lambda i, d: [c, "env", "merge", i, "-o", f"{d}/out.cubeenv"], True),
            ("env diff", ("cubeenv",), lambda i, d: [c, "env", "diff", i, i, "--json"], False),
            ("env prune", ("cubeenv",), lambda i, d: [c, "env", "prune", i, "--drop-target", "interp", "-o", f"{d}/out.cubeenv"], True),
            ("env sign", ("cubeenv",), lambda i, d: [c, "env", "sign", i, "--key", f"{f}/good.key", "-o", f"{d}/out.cubeenv"], True),
            ("env sign --key", ("key",), lambda i, d: [c, "env", "sign", f"{f}/good.cubeenv", "--key", i, "-o", f"{d}/out.cubeenv"], True),
            ("env verify --key", ("pub",), lambda i, d: [c, "env", "verify", f"{f}/signed.cubeenv", "--key", i], False),
            # --tunable names none: the inputs are loaded and a device opened, nothing is tuned.
            ("tune", ("so",), lambda i, d: [c, "tune", i, "--device", "interp", "--tunable", "none", "-o", f"{d}/out.cubeenv"], True),
        ]

    def case_folder(self, name):
        d = tempfile.mkdtemp(prefix=re.sub(r"[^a-z0-9]+", "-", name)[:40] + ".", dir=self.scratch)
        return d

    def input_cases(self):
        jobs = []
        for name, kinds, argv, writes in self.commands():
            for ext in kinds:
                for fixture, path, expect in self.inputs(ext):
                    if name == "tune" and expect == 0:
                        expect = 1  # "no tunable named 'none'"
                    if name == "cubecc-opt" and fixture == "hugename":
                        expect = 0  # IR it reads and prints; only compilers limit names
                    case = f"{name} {fixture}.{ext}"
                    jobs.append((case, name, argv, path, expect, writes))
        # .cpp sources: only the ones that fail before the host compiler runs (it takes seconds).
        for fixture in ("dir", "fifo", "devzero", "missing"):
            path = os.path.join(self.fixtures, f"{fixture}.cpp")
            for name, kinds, argv, writes in self.commands():
                if name in ("compile", "env build", "tune"):
                    jobs.append((f"{name} {fixture}.cpp", name, argv, path, 1, writes))

        def one(job):
            case, name, argv, path, expect, writes = job
            d = self.case_folder(case)
            out = [os.path.join(d, "out.cir"), os.path.join(d, "out.cubeenv")]
            self.check(case, argv(path, d), expect, outputs=out, folder=d)

        return [lambda j=j: one(j) for j in jobs]

    def output_cases(self):
        """Every command that writes -o, against hostile outputs (a good input each)."""
        f = self.fixtures
        good = {"compile": "good.cir", "cubecc-opt": "good.cir", "env build": "good.cir",
                "env merge": "good.cubeenv", "env prune": "good.cubeenv", "tune": "good.so",
                "env sign": "good.cubeenv", "env sign --key": "good.key"}
        outputs = [
            # (name, make(d) -> path, expected exit, stderr pattern)
            ("devfull-link", lambda d: self.link(d, "full", "/dev/full"), 1,
             r"full: error: not a regular file \(/dev/full is a character device\); cubecc writes only regular files"),
            ("directory", lambda d: self.mkdir(d, "outdir"), 1,
             r"outdir: error: not a regular file \(a directory\)"),
            ("fifo", lambda d: self.mkfifo(d, "outfifo"), 1, r"outfifo: error: not a regular file \(a FIFO\)"),
            ("missing-folder", lambda d: os.path.join(d, "none", "out"), 1,
             r"none/out: error: cannot create a temporary file in .*/none: No such file or directory"),
            ("link-to-file", lambda d: self.link(d, "link", "target", b"old contents\n"), 0, None),
            ("dangling-link", lambda d: self.link(d, "dangling", "made"), 0, None),
            ("link-loop", lambda d: self.loop(d), 1, r"more than 40 symbolic links"),
            ("devnull", lambda d: "/dev/null", 0, None),
            ("longpath", lambda d: os.path.join(d, "d/" * 3000 + "out"), 1,
             r"the path is \d+ bytes, longer than the system's limit \(PATH_MAX, 4096 bytes\)"),
            ("longname", lambda d: os.path.join(d, "n" * 300), 1, r"File name too long"),
        ]
        jobs = []
        for name, kinds, argv, writes in self.commands():
            if not writes:
                continue
            for out_name, make, expect, message in outputs:
                jobs.append((name, argv, good[name], out_name, make, expect, message))

        def one(job):
            name, argv, input_name, out_name, make, expect, message = job
            case = f"{name} -o {out_name}"
            if name == "tune" and expect == 0:
                expect, message = 1, r"no tunable named 'none'"
            d = self.case_folder(case)
            out = make(d)
            a = argv(os.path.join(f, input_name), d)
            a[a.index("-o") + 1] = out
            self.check(case, a, expect, message, outputs=[out], folder=d)

        return [lambda j=j: one(j) for j in jobs]

    def link(self, d, name, target, contents=None):
        if contents is not None:
            open(os.path.join(d, target), "wb").write(contents)
        os.symlink(target, os.path.join(d, name))
        return os.path.join(d, name)

    def mkdir(self, d, name):
        os.mkdir(os.path.join(d, name))
        return os.path.join(d, name)

    def mkfifo(self, d, name):
        os.mkfifo(os.path.join(d, name))
        return os.path.join(d, name)

    def loop(self, d):
        os.symlink("loop2", os.path.join(d, "loop1"))
        os.symlink("loop1", os.path.join(d, "loop2"))
        return os.path.join(d, "loop1")

    def stdout_cases(self):
        """Every command that prints, with standard output /dev/full and closed."""
        f, c, o = self.fixtures, self.cubecc, self.opt
        printing = [
            ("compile", [c, "compile", f"{f}/good.cir", "--emit", "ir"]),
            ("cubecc-opt", [o, f"{f}/good.cir"]),
            ("cubecc-opt stdin", [o, "-"]),
            ("kernels", [c, "kernels", f"{f}/good.so", "--json"]),
            ("env inspect", [c, "env", "inspect", f"{f}/good.cubeenv"]),
            ("env inspect --json", [c, "env", "inspect", f"{f}/good.cubeenv", "--json"]),
            ("env verify", [c, "env", "verify", f"{f}/good.cubeenv"]),
            ("env verify --key", [c, "env", "verify", f"{f}/signed.cubeenv", "--key", f"{f}/good.pub"]),
            ("env diff", [c, "env", "diff", f"{f}/good.cubeenv", f"{f}/good.cubeenv"]),
            ("devices", [c, "devices", "--json"]),
            ("--version", [c, "--version"]),
            ("--help", [c, "--help"]),
        ]
        jobs = []
        for name, argv in printing:
            tool = "cubecc-opt" if argv[0] == o else "cubecc"
            for how in ("full", "closed"):
                jobs.append((name, argv, how, tool))

        def one(job):
            name, argv, how, tool = job
            stdin = open(f"{f}/good.cir", "rb") if argv[-1] == "-" else subprocess.DEVNULL
            pattern = rf"{tool}: error: cannot write to standard output: " + (
                "No space left on device" if how == "full" else "Bad file descriptor")
            if how == "full":
                with open("/dev/full", "wb") as full:
                    self.check(f"{name} > /dev/full", argv, 1, pattern, stdin=stdin, stdout=full)
            else:
                self.check(f"{name} >&-", argv, 1, pattern, stdin=stdin, close_stdout=True)

        return [lambda j=j: one(j) for j in jobs]

    def other_cases(self):
        """Standard input, option values and options that are hostile."""
        f, c, o = self.fixtures, self.cubecc, self.opt
        jobs = []
        for name, source, expect, message in [
            ("stdin /dev/zero", "/dev/zero", 1, r"binary data \(a NUL byte at offset 0\)"),
            ("stdin /dev/null", "/dev/null", 1, r"expected 'module'"),
            ("stdin a directory", f, 1, r"cannot read the input: Is a directory"),
            ("stdin garbage", f"{f}/garbage.cir", 1, None),
            ("stdin good", f"{f}/good.cir", 0, None),
        ]:
            def one(name=name, source=source, expect=expect, message=message):
                fd = os.open(source, os.O_RDONLY)
                try:
                    self.check(f"cubecc-opt - < {name}", [o, "-"], expect, message, stdin=fd)
                finally:
                    os.close(fd)
            jobs.append(one)
        long_value = "x" * (100 << 10)
        for name, argv, expect, message in [
            ("compile --kernel <100 KiB>", [c, "compile", f"{f}/good.cir", "--kernel", long_value], 1,
             r"no kernel named 'xxxx+… \(102400 bytes\)'"),
            ("tune --tunable <100 KiB>", [c, "tune", f"{f}/good.so", "--device", "interp", "--tunable", long_value,
                                          "-o", os.path.join(self.scratch, "t.cubeenv")], 1,
             r"no tunable named 'xxxx+… \(102400 bytes\)'"),
            ("compile --target <100 KiB>", [c, "compile", f"{f}/good.cir", "--target", long_value], 1, r"unknown target"),
            # std::regex recursed once per character of a target name: a stack overflow.
            ("compile --target hip:gfx90a:a+:a+...", [c, "compile", f"{f}/good.cir", "--target", "hip:gfx90a" + ":a+" * 30000], 1,
             r"unknown target 'hip:gfx90a:a\+:a\+.*…' \(90010 bytes; no target name is over 64\)"),
            ("env build --target hip:gfx90a:a+:a+...", [c, "env", "build", f"{f}/good.cir", "--target", "hip:gfx90a" + ":a+" * 30000,
                                                       "-o", os.path.join(self.scratch, "b.cubeenv")], 1,
             r"unknown target 'hip:gfx90a:a\+:a\+.*…' \(90010 bytes; no target name is over 64\)"),
            ("compile --emit <100 KiB>", [c, "compile", f"{f}/good.cir", "--emit", long_value], 2, r"unknown --emit kind"),
            ("compile --print-after <100 KiB>", [c, "compile", f"{f}/good.cir", "--print-after", long_value], 2,
             r"unknown pass"),
            ("cubecc-opt --passes <100 KiB>", [o, f"{f}/good.cir", "--passes", long_value], 2, None),
            ("cubecc-opt --print-after <100 KiB>", [o, f"{f}/good.cir", "--print-after", long_value], 2, r"unknown pass"),
            ("env build --target <100 KiB>", [c, "env", "build", f"{f}/good.cir", "--target", long_value,
                                              "-o", os.path.join(self.scratch, "b.cubeenv")], 1, r"unknown target"),
            ("compile -o ''", [c, "compile", f"{f}/good.cir", "-o", ""], 2, r"-o is empty: give it a value or leave it out"),
            ("compile --frobnicate", [c, "compile", f"{f}/good.cir", "--frobnicate"], 2, None),
            ("env build, no -o", [c, "env", "build", f"{f}/good.cir", "--target", "interp"], 2, None),
            ("env inspect --frobnicate", [c, "env", "inspect", "--frobnicate"], 2, None),
            ("cubecc-opt --frobnicate", [o, "--frobnicate"], 2, None),
            ("cubecc frobnicate", [c, "frobnicate"], 2, None),
            ("devices --frobnicate", [c, "devices", "--frobnicate"], 2, None),
            ("tune, no input", [c, "tune", "-o", "x"], 2, None),
        ]:
            jobs.append(lambda n=name, a=argv, e=expect, m=message: self.check(n, a, e, m))
        return jobs

    def full_filesystem(self):
        """Writes into a full tmpfs of 256 KiB: exit 1 naming ENOSPC, the old file as it was, no
        new file, no temporary. Runs in a private mount namespace (nothing is mounted outside)."""
        d = self.case_folder("full-filesystem")
        mount = os.path.join(d, "mnt")
        os.mkdir(mount)
        prefix = ["unshare", "-m", "--propagation", "private"] if os.geteuid() == 0 else \
                 ["unshare", "-r", "-m", "--propagation", "private"]
        probe = subprocess.run(prefix + ["sh", "-c", f"mount -t tmpfs -o size=256k tmpfs {mount}"],
                               capture_output=True, text=True)
        if probe.returncode != 0 or shutil.which("unshare") is None:
            self.skips.append("full filesystem: cannot mount a tmpfs in a private mount namespace "
                              f"here ({probe.stderr.strip() or 'unshare failed'}); skipped")
            return
        f, c, o = self.fixtures, self.cubecc, self.opt
        m = mount
        runs = [
            ("cubecc-opt -o existing", f"{o} {f}/good.cir -o {m}/old.cir",
             r"old.cir: error: cannot write the file: write: No space left on device"),
            ("cubecc-opt -o new", f"{o} {f}/good.cir -o {m}/new.cir",
             r"new.cir: error: cannot write the file: write: No space left on device"),
            ("compile -o existing", f"{c} compile {f}/good.cir --emit ir -o {m}/old.cir",
             r"old.cir: error: cannot write the file: write: No space left on device"),
            ("env build -o existing", f"{c} env build {f}/good.cir --target interp -o {m}/old.cubeenv",
             r"old.cubeenv: error: cannot write the file: write: No space left on device"),
            ("env merge -o new", f"{c} env merge {f}/good.cubeenv -o {m}/new.cubeenv",
             r"new.cubeenv: error: cannot write the file: write: No space left on device"),
            ("cubecc-opt > file", f"{o} {f}/good.cir > {m}/stdout.cir",
             r"cubecc-opt: error: cannot write to standard output: No space left on device"),
        ]
        script = [f"mount -t tmpfs -o size=256k tmpfs {m} || exit 99",
                  f"printf 'old contents\\n' > {m}/old.cir",
                  f"printf 'old bundle\\n' > {m}/old.cubeenv",
                  f"head -c 1M /dev/zero > {m}/fill 2>/dev/null"]
        for i, (name, command, _) in enumerate(runs):
            script.append(f"timeout {TIMEOUT} {command} 2> {d}/err{i}; echo \"rc {i} $?\"")
        # What the filesystem holds afterwards (it goes away with the namespace).
        script.append(f"for p in {m}/* {m}/.[!.]*; do [ -e \"$p\" ] && echo \"file $(basename \"$p\") "
                      f"$(stat -c %s \"$p\") $(head -c 20 \"$p\" | tr -c '[:alnum:]' _)\"; done")
        p = subprocess.run(prefix + ["bash", "-c", "\n".join(script)], capture_output=True, text=True,
                           timeout=TIMEOUT * (len(runs) + 2), env=self.env)
        self.runs += len(runs)
        codes = dict(re.findall(r"^rc (\d+) (\d+)$", p.stdout, re.M))
        files = {x.group(1): (int(x.group(2)), x.group(3))
                 for x in re.finditer(r"^file (\S+) (\d+) (\S*)$", p.stdout, re.M)}
        for i, (name, _, message) in enumerate(runs):
            case = f"full filesystem: {name}"
            err = open(f"{d}/err{i}", errors="replace").read() if os.path.exists(f"{d}/err{i}") else ""
            code = int(codes.get(str(i), -1))
            if code != 1:
                self.fail(case, f"exit {code}, expected 1\n    stderr: {err[:1000]}")
            elif SANITIZER.search(err) or not re.search(message, err):
                self.fail(case, f"stderr does not match /{message}/: {err[:1000]}")
        if files.get("old.cir", (None, None))[1] != "old_contents_":
            self.fail("full filesystem", f"old.cir was changed: {files.get('old.cir')}")
        if files.get("old.cubeenv", (None, None))[1] != "old_bundle_":
            self.fail("full filesystem", f"old.cubeenv was changed: {files.get('old.cubeenv')}")
        for name in ("new.cir", "new.cubeenv"):
            if name in files:
                self.fail("full filesystem", f"{name} was created by a write that failed: {files[name]}")
        for name in files:
            if TEMPORARY.match(name):
                self.fail("full filesystem", f"a temporary file left behind: {name}")
        if not files:
            self.fail("full filesystem", "the listing is missing:\n" + p.stdout + p.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--slowest", type=int, default=0, help="list the N slowest cases")
    args = parser.parse_args()
    for device in ("/dev/full", "/dev/null", "/dev/zero"):
        if not os.path.exists(device) or not stat.S_ISCHR(os.stat(device).st_mode):
            sys.exit(f"cli-conformance: this machine has no {device}, which the cases use")
    # In memory where there is some: every output is fsynced, which a disk makes slow.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    scratch = tempfile.mkdtemp(prefix="cubecc-cli-conformance.", dir=shm)
    try:
        suite = Suite(os.path.abspath(args.build_dir), os.path.abspath(args.source_dir), scratch)
        suite.make_fixtures()
        if os.geteuid() == 0:
            suite.skips.append("unreadable inputs (mode 000): running as root, which reads them "
                               "anyway; skipped")
        jobs = suite.input_cases() + suite.output_cases() + suite.stdout_cases() + suite.other_cases()
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for future in [pool.submit(job) for job in jobs]:
                future.result()
        suite.full_filesystem()
    finally:
        for root, dirs, files in os.walk(scratch):
            for name in files:  # mode 000 fixtures
                path = os.path.join(root, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    os.chmod(path, 0o600)
        shutil.rmtree(scratch, ignore_errors=True)
    for seconds, case in sorted(suite.times, reverse=True)[: args.slowest]:
        print(f"{seconds:6.2f} s  {case}")
    for skip in suite.skips:
        print("SKIP:", skip)
    for x in suite.xfails:
        print("XFAIL:", x)
    for case in suite.now_passing:
        print(f"NOTE: '{case}' passes now: remove it from KNOWN_ELSEWHERE")
    for failure in suite.failures:
        print("FAIL:", failure)
    print(f"cli-conformance: {suite.runs} runs, {len(suite.failures)} failures, "
          f"{len(suite.xfails)} known elsewhere, {len(suite.skips)} skipped groups")
    return 1 if suite.failures else 0


if __name__ == "__main__":
    sys.exit(main())
