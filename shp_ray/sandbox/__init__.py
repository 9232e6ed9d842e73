"""The sandbox: untrusted code (a model's draft) run in a bounded process of its own, and the harness that
tests a candidate function in it (visible examples, hidden ``check``). Imports nothing else of the project."""

from shp_ray.sandbox.harness import ERROR_CLASSES, Example, ExampleResult, TestReport, run_check, run_examples
from shp_ray.sandbox.process import Limits, ProcessResult, run_program

__all__ = [
    "ERROR_CLASSES", "Example", "ExampleResult", "Limits", "ProcessResult", "TestReport",
    "run_check", "run_examples", "run_program",
]  # fmt: skip
