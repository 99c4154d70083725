"""The driver out of process (`nngpu serve`, nngpu.connect), split by job:

- wire: `codec` (the schema of every call and reply, fds included) and `wire` (one bounded
  SEQPACKET connection carrying calls both ways);
- session: `session` (one client's calls served against the Device) and `notices` (its
  callbacks' notifications, sent back as calls);
- proxies: `proxy` (the IDevice, IPreparedModel, IBuffer a client holds) and `client` (the
  connection under them, with the burst's proxies);
- process management: `process` (the accept loop, client caps, the service's entry point),
  `listen` (the socket's path, modes and peer uids) and `burst_ipc` (`python -m` entry).
"""
