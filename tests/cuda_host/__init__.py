"""The CUDA-dialect kernels run on the CPU: g++ builds them behind a prelude of the CUDA
built-ins and a test-only backend launches them through the real Plan. This proves the CUDA
rendering, not the CuPy glue (see host_backend.py)."""
