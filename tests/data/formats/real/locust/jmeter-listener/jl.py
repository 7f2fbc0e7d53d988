from locust import FastHttpUser, constant, events, task
from locust_plugins.listeners.jmeter import JmeterListener


class Web(FastHttpUser):
    wait_time = constant(0.01)

    @task(9)
    def home(self):
        self.client.get("/", name="home")

    @task(1)
    def missing(self):
        self.client.get("/missing", name="missing")


@events.init.add_listener
def on_init(environment, **kw):
    JmeterListener(env=environment, testplan="jl", results_filename="jmeter-listener.csv")
