// One request per iteration against the private nginx of make_real_samples.sh:
// about 94 % GET /, 3 % /missing (404), 2 % /busy (503), 1 % a closed
// loopback port (status 0, connection refused).
import http from 'k6/http';

export const BASE = __ENV.BASE || 'http://127.0.0.1:18790';
export const STEP_S = parseInt(__ENV.STEP_S || '8', 10);

export function oneRequest() {
  const u = Math.random();
  if (u < 0.94) return http.get(`${BASE}/`, { tags: { name: 'home' } });
  if (u < 0.97) return http.get(`${BASE}/missing`, { tags: { name: 'missing' } });
  if (u < 0.99) return http.get(`${BASE}/busy`, { tags: { name: 'busy' } });
  return http.get('http://127.0.0.1:9/', { tags: { name: 'refused' }, timeout: '2s' });
}

// fewer tags per sample keep the --out files small (k6 writes ~13 samples per request)
export const systemTags = ['status', 'method', 'name', 'scenario', 'expected_response', 'error_code'];
