// Closed model: 1, 2, 4, 8, 16 VUs held STEP_S seconds each (zero-length
// stages jump to the next level); every VU thinks 50 ms between requests.
import { sleep } from 'k6';
import { oneRequest, STEP_S, systemTags } from './common.js';

const levels = [1, 2, 4, 8, 16];
const stages = [];
for (const vus of levels) {
  stages.push({ duration: '0s', target: vus });
  stages.push({ duration: `${STEP_S}s`, target: vus });
}

export const options = {
  systemTags,
  scenarios: {
    ramp: { executor: 'ramping-vus', startVUs: 1, stages, gracefulRampDown: '0s', gracefulStop: '5s' },
  },
};

export default function () {
  oneRequest();
  sleep(0.05);
}
