package headroom;

import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import io.gatling.javaapi.core.*;
import io.gatling.javaapi.http.*;
import java.time.Duration;

/**
 * Open model: 50, 100, 200, 400, 800 new users per second for STEP_S seconds
 * each (constantUsersPerSec), every user one request; the same error mix as
 * the closed ramp.
 */
public class OpenRampSimulation extends Simulation {
  static final String BASE = System.getProperty("baseUrl", "http://127.0.0.1:18765");
  static final int STEP_S = Integer.getInteger("stepSeconds", 8);

  HttpProtocolBuilder protocol = http.baseUrl(BASE).disableCaching().disableWarmUp();

  ScenarioBuilder scn =
      scenario("open")
          .randomSwitch()
          .on(
              percent(94.0).then(exec(http("home").get("/"))),
              percent(3.0).then(exec(http("missing").get("/missing"))),
              percent(2.0).then(exec(http("busy").get("/busy"))),
              percent(1.0).then(exec(http("refused").get("http://127.0.0.1:9/"))));

  {
    setUp(
            scn.injectOpen(
                constantUsersPerSec(50).during(Duration.ofSeconds(STEP_S)),
                constantUsersPerSec(100).during(Duration.ofSeconds(STEP_S)),
                constantUsersPerSec(200).during(Duration.ofSeconds(STEP_S)),
                constantUsersPerSec(400).during(Duration.ofSeconds(STEP_S)),
                constantUsersPerSec(800).during(Duration.ofSeconds(STEP_S))))
        .protocols(protocol)
        .maxDuration(Duration.ofSeconds(5L * STEP_S + 30));
  }
}
