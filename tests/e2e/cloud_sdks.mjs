// Validates the fake upstream's cloud faces with Anthropic's official cloud SDKs, talking
// to the fake directly (no Gatehouse in between): if an SDK cannot use the fake, the fake
// is wrong. Prints one JSON summary per SDK on stdout for the Rust test that runs this.
// Env: FAKE_URL (the fake's origin).
import AnthropicBedrock from '@anthropic-ai/bedrock-sdk';
import AnthropicVertex from '@anthropic-ai/vertex-sdk';
import AnthropicFoundry from '@anthropic-ai/foundry-sdk';
import { exercise } from './exercise.mjs';

const base = process.env.FAKE_URL;

const out = {};
const bedrock = new AnthropicBedrock({
  baseURL: base,
  awsRegion: 'us-east-1',
  awsAccessKey: 'AKIDFAKEFAKEFAKE',
  awsSecretKey: 'fake-secret-key',
  maxRetries: 0,
});
out.bedrock = await exercise(bedrock, 'us.anthropic.claude-sonnet-4-6', { withCount: false });

const vertex = new AnthropicVertex({
  baseURL: `${base}/v1`,
  region: 'us-east5',
  projectId: 'fake-project',
  authClient: { projectId: 'fake-project', getRequestHeaders: async () => new Headers({ Authorization: 'Bearer fake-token' }) },
  maxRetries: 0,
});
out.vertex = await exercise(vertex, 'claude-sonnet-4-6');

const foundry = new AnthropicFoundry({ baseURL: `${base}/anthropic/`, apiKey: 'fake-foundry-key', maxRetries: 0 });
out.foundry = await exercise(foundry, 'claude-sonnet-4-6');

console.log(JSON.stringify(out));
