"""``python3 -m headroom.locust``: the path of the plugin file to give Locust with ``-f``."""

import sys
from pathlib import Path

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(
            "usage: python3 -m headroom.locust\n\nPrints the path of headroom's Locust plugin file, to give "
            "Locust as a second locustfile:\n  locust -f locustfile.py,$(python3 -m headroom.locust) "
            "--headless -u 40 -r 40 -t 60s --headroom-dir run1"
        )
    else:
        print(Path(__file__).with_name("headroom_locust.py"))
