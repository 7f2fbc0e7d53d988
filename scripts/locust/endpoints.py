"""A locustfile of three endpoints (issue 51's recordings and tests): what a multi-endpoint API test does.

Every user (FastHttpUser, no wait) requests, by weight, GET /api/v1/items (5), GET /api/v2/cart (3) and
GET /api/v1/search?q=headroom (2), each named by its path (Locust's ``name``): the Go test server
(testserver/) answers every /api/ path with its -work; ``-slow-prefix /api/v2/ -slow-work N`` makes the
cart alone slower.  Driven step by step by ``headroom ramp --engine locust --locustfile`` (with
``--ab A B --interleave steps`` for a comparison), which gives the listener on Locust's command line.
"""

from locust import FastHttpUser, constant, task


class Api(FastHttpUser):
    wait_time = constant(0)

    @task(5)
    def items(self):
        self.client.get("/api/v1/items", name="/api/v1/items")

    @task(3)
    def cart(self):
        self.client.get("/api/v2/cart", name="/api/v2/cart")

    @task(2)
    def search(self):
        self.client.get("/api/v1/search?q=headroom", name="/api/v1/search")
