package headroom;

import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import io.gatling.javaapi.core.*;
import io.gatling.javaapi.http.*;
import java.time.Duration;

/**
 * Closed model: 1, 2, 4, 8, 16 concurrent users held for STEP_S seconds each
 * (constantConcurrentUsers), every user one request; about 3 % 404, 2 % 503 and
 * 1 % connection refused (a closed loopback port).
 */
public class ClosedRampSimulation extends Simulation {
  static final String BASE = System.getProperty("baseUrl", "http://127.0.0.1:18765");
  static final int STEP_S = Integer.getInteger("stepSeconds", 8);

  HttpProtocolBuilder protocol = http.baseUrl(BASE).disableCaching().disableWarmUp();

  ScenarioBuilder scn =
      scenario("closed")
          .randomSwitch()
          .on(
              percent(94.0).then(exec(http("home").get("/"))),
              percent(3.0).then(exec(http("missing").get("/missing"))),
              percent(2.0).then(exec(http("busy").get("/busy"))),
              percent(1.0).then(exec(http("refused").get("http://127.0.0.1:9/"))));

  {
    setUp(
            scn.injectClosed(
                constantConcurrentUsers(1).during(Duration.ofSeconds(STEP_S)),
                constantConcurrentUsers(2).during(Duration.ofSeconds(STEP_S)),
                constantConcurrentUsers(4).during(Duration.ofSeconds(STEP_S)),
                constantConcurrentUsers(8).during(Duration.ofSeconds(STEP_S)),
                constantConcurrentUsers(16).during(Duration.ofSeconds(STEP_S))))
        .protocols(protocol)
        .maxDuration(Duration.ofSeconds(5L * STEP_S + 30));
  }
}
