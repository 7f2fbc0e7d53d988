"""headroom's Locust listener as a locustfile of its own: ``locust -f locustfile.py,THIS_FILE``.

It defines no users; importing :mod:`headroom.locust` registers the listener (``--headroom-dir``).
"""

import headroom.locust  # noqa: F401
