"""The small workload the replay tests record (issue 14 item 5, docs/replay.md): two Python
processes ping-ponging a byte over two pipes (50 µs of CPU a side a round) and a CPU burner.

`python WORKLOAD ROUNDS BURN_S PIDFILE [gate]`: with `gate`, it first reads one byte from its
stdin, so a recorder can learn its pid and start tracing before it does anything. At the end
it writes its pids (ping, pong, burner) to PIDFILE.
"""

import textwrap

WORKLOAD = textwrap.dedent("""
    import os, sys, time
    def spin(us):
        end = time.perf_counter_ns() + us * 1000
        while time.perf_counter_ns() < end:
            pass
    rounds, burn_s, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    if len(sys.argv) > 4:
        sys.stdin.buffer.read(1)
    r1, w1 = os.pipe(); r2, w2 = os.pipe()
    burner = os.fork()
    if burner == 0:
        end = time.perf_counter() + burn_s
        while time.perf_counter() < end:
            pass
        os._exit(0)
    pong = os.fork()
    if pong == 0:
        for _ in range(rounds):
            os.read(r1, 1); spin(50); os.write(w2, b"x")
        os._exit(0)
    for _ in range(rounds):
        spin(50); os.write(w1, b"x"); os.read(r2, 1)
    os.waitpid(pong, 0); os.waitpid(burner, 0)
    with open(out, "w") as f:
        f.write(f"{os.getpid()} {pong} {burner}")
""")
