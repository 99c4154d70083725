"""Driver services reachable from other processes (nngpu.service.burst_ipc)."""
