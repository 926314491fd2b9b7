// Validates the fake upstream's Anthropic-platform faces with Anthropic's official SDKs,
// talking to the fake directly (no Gatehouse in between): if an SDK cannot use the fake,
// the fake is wrong. `AnthropicGoogleCloud` (@anthropic-ai/google-cloud-sdk) with a
// static Google token, and the Anthropic SDK 1.x with workload-identity federation (its
// `oidc_federation` config: the identity token file exchanged at /v1/oauth/token). Prints
// one JSON summary per SDK on stdout for the Rust test that runs this.
// Env: FAKE_URL (the fake's origin), IDENTITY_TOKEN_FILE (a file holding a JWT).
import { AnthropicGoogleCloud } from '@anthropic-ai/google-cloud-sdk';
import Anthropic from 'anthropic-sdk-1';
import { exercise } from './exercise.mjs';

const base = process.env.FAKE_URL;
const model = 'claude-opus-4-8';

const out = {};
const google = new AnthropicGoogleCloud({
  baseURL: `${base}/v1/projects/fake-project/locations/global/workspaces/wrk-fake/invoke`,
  bearerTokenProvider: async () => 'ya29.fake-google-token',
  maxRetries: 0,
});
out.google_cloud = await exercise(google, model);

// maxRetries 1: the SDK's one retry after a 401 (a refused token) re-exchanges.
const federated = new Anthropic({
  baseURL: base,
  config: {
    organization_id: '00000000-0000-4000-8000-000000000000',
    workspace_id: 'wrkspc_fake',
    authentication: {
      type: 'oidc_federation',
      federation_rule_id: 'fdrl_fake',
      identity_token: { source: 'file', path: process.env.IDENTITY_TOKEN_FILE },
    },
  },
  maxRetries: 1,
});
out.federation = await exercise(federated, model);

console.log(JSON.stringify(out));
