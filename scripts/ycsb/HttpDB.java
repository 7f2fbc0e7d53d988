package headroom.ycsb;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * A YCSB binding whose only operation is an HTTP GET, so that YCSB's own client and measurements
 * (HdrHistogram interval logs) can drive a web server.
 *
 * <p>Properties: {@code httpdb.url} (the page every read fetches), {@code httpdb.missingurl} and
 * {@code httpdb.missingevery} (every Nth read of a thread fetches that URL instead; 0 never).
 * A read is Status.OK when the server answers 2xx, Status.NOT_FOUND on 404, else Status.ERROR:
 * YCSB records the failed ones under its READ-FAILED measurement.
 */
public class HttpDB extends DB {
  private HttpClient client;
  private URI url;
  private URI missing;
  private long every;
  private long reads;

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String u = p.getProperty("httpdb.url");
    if (u == null) {
      throw new DBException("httpdb.url is required");
    }
    url = URI.create(u);
    String m = p.getProperty("httpdb.missingurl");
    missing = m == null ? null : URI.create(m);
    every = Long.parseLong(p.getProperty("httpdb.missingevery", "0"));
    client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(5)).build();
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    reads++;
    URI target = (missing != null && every > 0 && reads % every == 0) ? missing : url;
    HttpRequest req = HttpRequest.newBuilder(target).timeout(Duration.ofSeconds(10)).GET().build();
    try {
      HttpResponse<byte[]> resp = client.send(req, HttpResponse.BodyHandlers.ofByteArray());
      int code = resp.statusCode();
      if (code >= 200 && code < 300) {
        return Status.OK;
      }
      return code == 404 ? Status.NOT_FOUND : Status.ERROR;
    } catch (IOException e) {
      return Status.ERROR;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    return Status.NOT_IMPLEMENTED;
  }

  @Override
  public Status delete(String table, String key) {
    return Status.NOT_IMPLEMENTED;
  }
}
