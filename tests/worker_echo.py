"""A worker for tests/test_worker.py: answers each JSON line with its payload, dies or hangs when asked."""
import json
import os
import sys
import time

print(json.dumps({"ready": True, "pid": os.getpid()}), flush=True)
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("die"):
        os._exit(3)
    if msg.get("hang"):
        time.sleep(60)
    print(json.dumps({"echo": msg, "pid": os.getpid()}), flush=True)
