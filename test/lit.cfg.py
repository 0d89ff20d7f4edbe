# lit configuration for partc: FileCheck tests of passes, dialects, the
# importer, the tools and bad input.
import os
import shutil
import subprocess

import lit.formats

config.name = "partc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "unit", "conformance", "models"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.partc_obj_root, "test")
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
# Some machines set OpenBLAS's kernel choice because older OpenBLAS builds
# compute wrong results on their processors; the tests keep that choice.
for name, value in os.environ.items():
    if name.startswith("OPENBLAS_"):
        config.environment[name] = value

config.substitutions.append(("%testdata", config.onnx_testdata))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%partc_bin", config.partc_tools_dir))
config.environment["PATH"] = os.pathsep.join(
    [config.partc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])

# In a sanitizer build every report aborts: a crash, unlike an exit code,
# also fails the tests that expect an error ("not partc ...").
if getattr(config, "sanitizers", ""):
    config.environment["ASAN_OPTIONS"] = "abort_on_error=1:detect_leaks=1"
    config.environment["UBSAN_OPTIONS"] = "abort_on_error=1:print_stacktrace=1"
    config.available_features.add("sanitizer")

# GPU tests say "REQUIRES: cuda" and are reported as unsupported elsewhere.
try:
    if shutil.which("nvidia-smi") and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True).returncode == 0:
        config.available_features.add("cuda")
except OSError:
    pass
# Small ONNX models are generated at test time with Debian's python3-onnx.
config.substitutions.append(("%python", "/usr/bin/python3"))
if subprocess.run(["/usr/bin/python3", "-c", "import onnx, numpy"],
                  capture_output=True).returncode == 0:
    config.available_features.add("python-onnx")
# Checks against PyTorch itself need Debian's python3-torch and -torchvision.
if subprocess.run(["/usr/bin/python3", "-c", "import torch, torchvision"],
                  capture_output=True).returncode == 0:
    config.available_features.add("python-torch")
if os.path.isdir(config.onnx_testdata):
    config.available_features.add("onnx-testdata")
