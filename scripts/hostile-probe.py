#!/usr/bin/env python3
"""hostile-probe: tries gentrain the way a hostile or unlucky user would, and counts
what happens. Not a test (it prints figures, it never fails a build): a campaign to
run before a release and after any change to a reader.

Cases, all made here from a tiny run of its own (no file of the user is touched):
  config    every key of `gentrain train --help` set to each of a list of odd values
            (negative, zero, huge, fractional, NaN, infinite, empty, text, overflowing);
  options   every option of the other verbs' --help (prepare, sample, plan, export)
            that takes a value set to the same odd values, and those that name a file
            to odd paths (missing, a folder, a device, a text file where HDF5 is read,
            a data file where a model is, a path of 5,000 characters); inspect's
            argument set to those paths and to folders, with and without --verify;
  env       every GENTRAIN_* variable the program checks (the table of
            src/cli/env_check.c), and the OpenMP, OpenBLAS, Slurm and MPI launcher
            variables gentrain reads, set to the odd values for a short training run
            and for `gentrain --build-info` (which must print every one of its lines
            when it exits 0);
  data      the token file damaged: bytes flipped in its metadata or anywhere, 4 or 8
            bytes set to 0 or 0xff (the size fields), cut short, junk appended; trained on;
  model     model.h5 damaged the same ways; `sample` from it and `inspect` it;
  ckpt      a checkpoint damaged the same ways; resumed from (`train --resume FILE`)
            and inspected;
  folder    a copy of a run folder with its model.h5, its newest checkpoint or its
            log.jsonl damaged the same ways; `inspect FOLDER` and `inspect --verify
            FOLDER`.
Outcomes:
  refused   exit 1 or 2 with exactly one "gentrain: error:" line (inspect: at least one)
  accepted  exit 0: for config, options, env and data a working run (the damage hit
            token values or unused bytes), or one still printing at the timeout (a long
            run asked for); for model and ckpt only when the output is the undamaged
            file's own (the damage hit bytes no reader uses), otherwise it is BAD;
            for folder the same, the times of its lines aside (a damaged log may
            say other numbers: they are its records; so may a checkpoint's config
            text without --verify, which alone reads the checksum that covers it)
  HDF5      (sanitizer builds) a sanitizer report whose top frame is inside libhdf5,
            from the child that reads the file first (src/base/probe.h), after which the
            command ended with exit 1 and its one line "reading it crashed the HDF5
            library" or "... ended the reading process early": HDF5's own fault on the
            damaged file, contained as in a plain build (where the child takes a signal)
  BAD       a signal, a hang (the timeout), any other sanitizer report (leaks judged
            with tests/lsan.supp, as in `make check`, unless LSAN_OPTIONS is set), an
            exit 1/2 without exactly one error line, or a damaged model/checkpoint
            giving other output with exit 0.
Every BAD case is listed with its command, so it can be replayed.

usage: scripts/hostile-probe.py --gentrain build/gentrain [--per-kind N] [--seed S]
                                [--timeout S] [--keep DIR] [--skip-config]
                                [--skip-options] [--skip-env]
"""
import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--block_size", "16",
        "--batch_size", "2", "--eval_every", "0", "--threads", "1"]

LSAN_SUPPRESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                 "lsan.supp")

ODD_VALUES = ["-1", "0", "1", "2147483648", "99999999999999999999", "1e308", "-1e308",
              "nan", "inf", "-inf", "0.5", "", " ", "abc", "0x10", "1e-320",
              "357913942", "none"]


class Probe:
    def __init__(self, gentrain, work, timeout):
        self.gentrain = gentrain
        self.work = work
        self.timeout = timeout
        self.counts = {}
        self.bad = []

    def run(self, args, env=None):
        full_env = dict(os.environ)
        full_env.pop("OPENBLAS_CORETYPE", None)
        # In a sanitizer build, the leaks of Open MPI's own start-up (a case that makes
        # gentrain start MPI) are told from gentrain's as in `make check`
        if "LSAN_OPTIONS" not in full_env and os.path.exists(LSAN_SUPPRESSIONS):
            full_env["LSAN_OPTIONS"] = "suppressions=%s:print_suppressions=0" % \
                LSAN_SUPPRESSIONS
        # gentrain's reader processes give up on a file after this (a damaged file
        # on which HDF5 loops), well inside the timeout here
        full_env["GENTRAIN_PROBE_SECONDS"] = str(max(1, self.timeout // 4))
        full_env.update(env or {})
        try:
            p = subprocess.run([self.gentrain] + args, cwd=self.work, env=full_env,
                               stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=self.timeout)
            return p.returncode, p.stdout.decode("utf-8", "replace"), \
                p.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:  # what it printed tells a long run
            return "timeout", (e.stdout or b"").decode("utf-8", "replace"), \
                (e.stderr or b"").decode("utf-8", "replace")

    def record(self, kind, outcome, what, detail=""):
        key = (kind, outcome)
        self.counts[key] = self.counts.get(key, 0) + 1
        if outcome == "BAD":
            self.bad.append((kind, what, detail))

    def judge(self, kind, what, rc, err, inspect=False, same_as=None, out="", working=None):
        """working: a pattern of out that tells a long but working run (it still
        printed it when the timeout came): accepted, not a hang."""
        sanitizer = "AddressSanitizer" in err or "runtime error:" in err
        errors = len(re.findall(r"^gentrain: error:", err, re.M))
        if rc == "timeout" and working and re.search(working, out, re.M):
            return self.record(kind, "accepted", what)
        if rc == "timeout":
            return self.record(kind, "BAD", what, "no end within %d s" % self.timeout)
        if rc < 0 or rc > 128:
            return self.record(kind, "BAD", what, "ended by signal (rc %d)" % rc)
        if sanitizer:
            contained = re.search(r"^gentrain: error: .*: reading it (crashed the HDF5 "
                                  r"library|ended the reading process early)", err, re.M)
            if (top_frame_in_hdf5(err) and contained and rc == 1 and errors == 1):
                return self.record(kind, "HDF5", what)
            return self.record(kind, "BAD", what, "sanitizer report")
        if rc in (1, 2):
            if errors == 1 or (inspect and errors >= 1):
                return self.record(kind, "refused", what)
            return self.record(kind, "BAD", what, "exit %d with %d error lines: %s" %
                               (rc, errors, err.strip()[-300:]))
        if rc == 0:
            if same_as is not None and out != same_as:
                return self.record(kind, "BAD", what, "exit 0 with other output than "
                                   "the undamaged file's")
            return self.record(kind, "accepted", what)
        return self.record(kind, "BAD", what, "exit %d" % rc)


def top_frame_in_hdf5(err):
    """Whether the first stack of a sanitizer report starts inside libhdf5: its
    first frame past the sanitizer's own interceptors."""
    for m in re.finditer(r"^\s*#(\d+) 0x[0-9a-f]+ (?:in (\S+) )?(.*)$", err, re.M):
        func, where = m.group(2) or "", m.group(3)
        if func.startswith(("__interceptor_", "__asan", "__sanitizer")) or \
                "libsanitizer" in where or "libasan" in where or "libubsan" in where:
            continue
        return "libhdf5" in where
    return False


def damage(src, dst, rng):
    """Copies src to dst with one kind of damage; returns its description."""
    data = bytearray(open(src, "rb").read())
    n = len(data)
    kind = rng.choice(["flip-meta", "flip-any", "word0", "wordff", "truncate", "junk",
                       "zero-block"])
    if kind == "flip-meta":
        off = rng.randrange(min(n, 4096))
        data[off] ^= 1 << rng.randrange(8)
    elif kind == "flip-any":
        off = rng.randrange(n)
        data[off] ^= 1 << rng.randrange(8)
    elif kind in ("word0", "wordff"):
        width = rng.choice([4, 8])
        off = rng.randrange(0, max(1, n - width)) & ~(width - 1)
        data[off:off + width] = (b"\0" if kind == "word0" else b"\xff") * width
    elif kind == "truncate":
        off = rng.randrange(n)
        data = data[:off]
    elif kind == "junk":
        data += bytes(rng.randrange(256) for _ in range(rng.choice([1, 100, 5000])))
        off = n
    else:
        off = rng.randrange(n) & ~511
        data[off:off + 512] = bytes(len(data[off:off + 512]))
    open(dst, "wb").write(data)
    return "%s at %d" % (kind, off)


def make_seeds(probe, corpus):
    text = open(corpus, "rb").read()[:200000]
    open(os.path.join(probe.work, "slice.txt"), "wb").write(text)
    steps = [["prepare", "slice.txt", "-o", "d.h5"],
             ["train", "--data", "d.h5"] + TINY + ["--steps", "2", "--ckpt_every", "1",
                                                   "--out", "seed"]]
    for args in steps:
        rc, out, err = probe.run(args)
        if rc != 0:
            sys.exit("hostile-probe: making the seeds failed: gentrain %s\n%s" %
                     (" ".join(args), err))
    ckpts = sorted(os.listdir(os.path.join(probe.work, "seed", "checkpoints")))
    return os.path.join("seed", "checkpoints", ckpts[0])


def config_cases(probe):
    rc, out, err = probe.run(["train", "--help"])
    keys = sorted(set(re.findall(r"^  ([a-z_]+) ", out, re.M)) - {"data", "out"})
    for key in keys:
        for value in ODD_VALUES:
            args = ["train", "--data", "d.h5"] + TINY + ["--steps", "2", "--out", "",
                                                       "--" + key, value]
            rc, out, err = probe.run(args)
            what = "gentrain " + " ".join(repr(a) if a in ("", " ") else a for a in args)
            probe.judge("config", what, rc, err, out=out, working=r"^step ")
    print("hostile-probe: config: %d keys x %d values done" % (len(keys), len(ODD_VALUES)),
          flush=True)


# Output options: where a verb writes. Their odd paths name no device: a run as root
# would write its .tmp beside it, in /dev.
OUTPUT_OPTIONS = {"-o", "--out", "--output", "--save-tokenizer"}
ODD_INPUTS = ["", "/nonexistent/x", ".", "/dev/null", "slice.txt", "d.h5",
              os.path.join("seed", "model.h5"), "x" * 5000]
ODD_OUTPUTS = ["", "/nonexistent/x", ".", "afolder", "x" * 5000]


def verb_options(probe, verb):
    """The options of `gentrain VERB --help` that take a value (written `--opt VALUE`,
    `--opt [VALUE]` or `--opt=VALUE` anywhere in it, the usage lines too), and whether
    the value names a file: [(option, is_path)], in the order of the help."""
    rc, out, err = probe.run([verb, "--help"])
    found = {}
    for m in re.finditer(r"(--[a-z][a-z-]*)[ =]\[?([A-Z][A-Za-z0-9_.]*)", out):
        opt, value = m.group(1), m.group(2)
        is_path = opt in OUTPUT_OPTIONS or bool(re.search(r"FILE|PATH|DIR|OUT|LOG", value))
        found.setdefault(opt, is_path)
    if verb == "export":
        found.setdefault("--format", False)  # takes a word (hf), not a placeholder
    return list(found.items())


def option_cases(probe):
    os.makedirs(os.path.join(probe.work, "afolder"), exist_ok=True)
    bases = {"prepare": ["prepare", "slice.txt", "-o", "p.h5"],
             "sample": ["sample", "--model", os.path.join("seed", "model.h5"),
                        "--tokens", "8", "--seed", "1"],
             "plan": ["plan", "--n_layer", "1", "--n_head", "2", "--n_embd", "16",
                      "--block_size", "16", "--batch_size", "2", "--vocab_size", "256",
                      "--core-gflops", "10"],
             "export": ["export", "--format", "hf", "--model",
                        os.path.join("seed", "model.h5"), "-o", "hf"]}
    count = 0
    for verb, base in bases.items():
        for opt, is_path in verb_options(probe, verb):
            if opt == "--measure":
                continue  # a timing run, not a reader
            values = ODD_VALUES + ((ODD_OUTPUTS if opt in OUTPUT_OPTIONS else ODD_INPUTS)
                                   if is_path else [])
            for value in values:
                args = base + [opt, value]
                rc, out, err = probe.run(args)
                what = "gentrain " + " ".join(repr(a) if a in ("", " ") else a[:80]
                                              for a in args)
                count += 1
                probe.judge("options", what, rc, err, out=out, working=r"\S")
    # inspect's one argument, a file or a run folder, with and without --verify
    for value in ODD_INPUTS + ["seed", "afolder", os.path.join("seed", "checkpoints")]:
        for flags in ([], ["--verify"]):
            args = ["inspect"] + flags + [value]
            rc, out, err = probe.run(args)
            what = "gentrain " + " ".join(repr(a) if a in ("", " ") else a[:80] for a in args)
            count += 1
            probe.judge("options", what, rc, err, inspect=True, out=out)
    print("hostile-probe: options: %d runs of prepare, sample, plan, export and inspect done"
          % count, flush=True)


# The keys of `gentrain --build-info`'s lines, each of which it prints when it exits 0.
BUILD_INFO_KEYS = ["compiler", "MPI", "HDF5", "BLAS", "CUDA", "NCCL", "GPUs", "CPU",
                   "kernels", "bf16 products"]

# Variables gentrain reads besides its own GENTRAIN_* (the threads, the BLAS core, the
# launcher's world).
OTHER_ENV = ["OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "OPENBLAS_NUM_THREADS",
             "OPENBLAS_CORETYPE", "SLURM_CPUS_PER_TASK", "SLURM_PROCID",
             "SLURM_STEP_NUM_TASKS", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
             "PMI_SIZE", "PMIX_RANK"]


def env_cases(probe):
    table = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "cli",
                         "env_check.c")
    try:
        own = sorted(set(re.findall(r'\{"(GENTRAIN_[A-Z0-9_]+)"', open(table).read())))
    except OSError as e:
        sys.exit("hostile-probe: cannot read the variables' table %s: %s" % (table, e))
    if not own:
        sys.exit("hostile-probe: no GENTRAIN_* variable found in %s" % table)
    base = ["train", "--data", "d.h5"] + TINY + ["--steps", "2", "--out", ""]
    for name in own + OTHER_ENV:
        for value in ODD_VALUES:
            rc, out, err = probe.run(base, env={name: value})
            what = "%s=%r gentrain %s" % (name, value, " ".join(repr(a) if a == "" else a
                                                                for a in base))
            probe.judge("env", what, rc, err, out=out, working=r"^step ")
            rc, out, err = probe.run(["--build-info"], env={name: value})
            what = "%s=%r gentrain --build-info" % (name, value)
            missing = [k for k in BUILD_INFO_KEYS if not re.search("^%s: " % k, out, re.M)]
            if rc == 0 and missing:
                probe.record("env-build-info", "BAD", what,
                             "exit 0 without the line%s %s" % ("s" if len(missing) > 1 else "",
                                                              ", ".join(missing)))
            else:
                probe.judge("env-build-info", what, rc, err, out=out)
    print("hostile-probe: env: %d variables x %d values done, each for a training run and "
          "for --build-info" % (len(own) + len(OTHER_ENV), len(ODD_VALUES)), flush=True)


def file_cases(probe, rng, per_kind, ckpt):
    sample = ["sample", "--model", "CASE", "--tokens", "8", "--seed", "1",
              "--prompt", "ROMEO:"]
    resume = ["train", "--data", "d.h5"] + TINY + ["--steps", "3", "--out", "resumed",
                                                   "--resume", "CASE"]
    kinds = [("data", "d.h5", [["train", "--data", "CASE"] + TINY +
                               ["--steps", "2", "--out", ""]]),
             ("model", os.path.join("seed", "model.h5"), [sample]),
             ("ckpt", ckpt, [resume])]
    for kind, seed, commands in kinds:
        baselines = [probe.run([seed if a == "CASE" else a for a in c])[1]
                     for c in commands]
        for i in range(per_kind):
            case = "%s-%04d.h5" % (kind, i)
            how = damage(os.path.join(probe.work, seed), os.path.join(probe.work, case), rng)
            for c, base in zip(commands, baselines):
                args = [case if a == "CASE" else a for a in c]
                rc, out, err = probe.run(args)
                same = None if kind == "data" else base
                if kind == "ckpt":  # compare the losses, not the timings
                    out = "\n".join(re.findall(r"^step .*loss \S+", out, re.M))
                    same = "\n".join(re.findall(r"^step .*loss \S+", base, re.M))
                probe.judge(kind, "%s (%s): gentrain %s" % (case, how, " ".join(args)),
                            rc, err, same_as=same, out=out)
            rc, out, err = probe.run(["inspect", case])
            probe.judge(kind + "-inspect", "%s (%s): gentrain inspect %s" % (case, how, case),
                        rc, err, inspect=True)
        print("hostile-probe: %s: %d files done" % (kind, per_kind), flush=True)


def folder_cases(probe, rng, per_kind):
    """Copies of the seed run folder, each with one of its files damaged, inspected."""
    def shown(out):  # the folder's name, its files' times and sizes (junk appended to a
        # checkpoint is bytes no reader uses) move between cases
        out = re.sub(r"(written|started) [^;)\n]*", r"\1 T", out.split("\n", 1)[-1])
        return re.sub(r"the newest [0-9.]+ \w+,", "the newest N,", out)
    bases = {v: shown(probe.run(["inspect"] + v.split() + ["seed"])[1])
             for v in ("", "--verify")}
    newest = max(os.listdir(os.path.join(probe.work, "seed", "checkpoints")))
    targets = ["model.h5", "log.jsonl", os.path.join("checkpoints", newest)]
    for i in range(per_kind):
        case = "folder-%04d" % i
        dst = os.path.join(probe.work, case)
        shutil.copytree(os.path.join(probe.work, "seed"), dst)
        target = rng.choice(targets)
        how = damage(os.path.join(probe.work, "seed", target), os.path.join(dst, target), rng)
        for v, base in bases.items():
            rc, out, err = probe.run(["inspect"] + v.split() + [case])
            what = "%s (%s of %s): gentrain inspect %s" % (case, how, target,
                                                           " ".join(v.split() + [case]))
            # without --verify a checkpoint's damaged config text passes as its tensors
            # do (one checksum covers them all): its numbers may change, as a log's
            loose = target == "log.jsonl" or (not v and target.startswith("checkpoints"))
            probe.judge("folder" + (v[1:] if v else "-inspect"), what, rc, err,
                        inspect=True, same_as=None if loose else base, out=shown(out))
        shutil.rmtree(dst)
    print("hostile-probe: folder: %d run folders done" % per_kind, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gentrain", required=True)
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "..",
                                                     "data", "tinyshakespeare.txt"))
    ap.add_argument("--per-kind", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=60)
    ap.add_argument("--keep", help="work in this folder and keep it")
    ap.add_argument("--skip-config", action="store_true")
    ap.add_argument("--skip-options", action="store_true")
    ap.add_argument("--skip-env", action="store_true")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="gentrain-probe.")
    os.makedirs(work, exist_ok=True)
    probe = Probe(os.path.abspath(a.gentrain), work, a.timeout)
    ckpt = make_seeds(probe, os.path.abspath(a.corpus))
    if not a.skip_config:
        config_cases(probe)
    if not a.skip_options:
        option_cases(probe)
    if not a.skip_env:
        env_cases(probe)
    file_cases(probe, random.Random(a.seed), a.per_kind, ckpt)
    folder_cases(probe, random.Random(a.seed + 1), a.per_kind)
    total = sum(probe.counts.values())
    print("hostile-probe: %d runs" % total)
    for kind in sorted({k for k, _ in probe.counts}):
        row = {o: probe.counts.get((kind, o), 0)
               for o in ("refused", "accepted", "HDF5", "BAD")}
        print("  %-14s refused %4d  accepted %4d  HDF5 %3d  BAD %3d" %
              (kind, row["refused"], row["accepted"], row["HDF5"], row["BAD"]))
    for kind, what, detail in probe.bad:
        print("BAD %s: %s\n    %s" % (kind, detail, what))
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    print("%d bad outcomes" % len(probe.bad))


if __name__ == "__main__":
    main()
