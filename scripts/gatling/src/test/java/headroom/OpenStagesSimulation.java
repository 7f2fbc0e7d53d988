package headroom;

import static io.gatling.javaapi.core.CoreDsl.*;
import static io.gatling.javaapi.http.HttpDsl.*;

import io.gatling.javaapi.core.*;
import io.gatling.javaapi.http.*;
import java.time.Duration;
import java.util.Arrays;

/**
 * Open model at low rates: RATES (default 20,40,60,80) new users per second, STEP_S seconds each
 * (constantUsersPerSec), every user one GET of the page and gone.  Against a fast server about one
 * user is active at a time, so the steps show only in the users' arrival rate (USER START records).
 */
public class OpenStagesSimulation extends Simulation {
  static final String BASE = System.getProperty("baseUrl", "http://127.0.0.1:18765");
  static final int STEP_S = Integer.getInteger("stepSeconds", 8);
  static final double[] RATES =
      Arrays.stream(System.getProperty("rates", "20,40,60,80").split(","))
          .mapToDouble(Double::parseDouble)
          .toArray();

  HttpProtocolBuilder protocol = http.baseUrl(BASE).disableCaching().disableWarmUp();

  ScenarioBuilder scn = scenario("open-stages").exec(http("home").get("/"));

  {
    OpenInjectionStep[] steps =
        Arrays.stream(RATES)
            .mapToObj(r -> constantUsersPerSec(r).during(Duration.ofSeconds(STEP_S)))
            .toArray(OpenInjectionStep[]::new);
    setUp(scn.injectOpen(steps))
        .protocols(protocol)
        .maxDuration(Duration.ofSeconds((long) RATES.length * STEP_S + 30));
  }
}
