"""nngpu's model zoo: ordinary TFLite models made by TensorFlow's own converter (generate.py, run in
.venv-zoo), and their comparison with the TFLite interpreter (report.py and compare.py, run in the
project's venv: they never import tensorflow)."""
