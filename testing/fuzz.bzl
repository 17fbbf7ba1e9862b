"""clocksync_fuzz_test: one fuzz harness, two ways to run it.

  <name>          a cc_test: the harness's LLVMFuzzerTestOneInput over every
                  seed of its corpus directory and deterministic mutations of
                  them (testing/fuzz_replay_main.cc), in every `bazel test
                  //...` and under --config=asan.
  <name>_fuzzer   the same harness linked with libFuzzer's main (clang:
                  --config=fuzz; tagged manual, so //... under gcc skips it).
                  deploy/fuzz.sh builds and runs these.

The corpus is <package>/testdata/fuzz/<name>/ (seeds kept in the repo).
"""

load("//:build_defs.bzl", "CLOCKSYNC_COPTS")

def clocksync_fuzz_test(name, srcs, deps, corpus = None, size = "small"):
    corpus = corpus or "testdata/fuzz/" + name
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        copts = CLOCKSYNC_COPTS,
        data = native.glob([corpus + "/**"]),
        args = [native.package_name() + "/" + corpus],
        deps = deps + ["//testing:fuzz_replay_main"],
    )
    native.cc_binary(
        name = name + "_fuzzer",
        testonly = True,
        srcs = srcs,
        copts = CLOCKSYNC_COPTS,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = deps,
    )
