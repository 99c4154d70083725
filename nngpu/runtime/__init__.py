"""Running a prepared model: the reference interpreter and its model context, the numpy plan,
device plans (segments of compiled steps, barriers, graph capture and replay).

The compiler (nngpu/compiler) turns a model into steps; the runtime imports only its step types
(compiler/steps.py) and is handed the lowering it compiles segments with, so nothing here
depends on how steps are made."""
