"""Compiler options shared by clocksync's own targets."""

# Warnings are errors for our code (not for generated or system code).
CLOCKSYNC_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
]
