//! Every in-process integration and end-to-end test of `gatehouse-tests`, as modules of one
//! test binary, so the engine is linked once. Each module is one area; tests start their
//! own gateway on port 0 and never touch process-wide state, so they run in parallel.

mod backup;
mod chat_door;
mod claude_login;
mod clients;
mod clouds;
mod dashboard;
mod desktop_app;
mod desktop_connected;
mod desktop_presets;
mod edge;
mod failover;
mod flood;
mod fuzz_corpus;
mod hostile;
mod idempotency;
mod identity;
mod idp_outage;
mod inference;
mod inference_limits;
mod key_pools;
mod metrics;
mod openai_upstream;
mod otlp;
mod policy;
mod postgres;
mod postgres_tls;
mod pricing;
mod routing_health;
mod routing_rules;
mod routing_shared;
mod routing_strategies;
mod slow_clients;
mod spend;
mod spend_concurrency;
mod spend_disconnect;
mod spend_leases;
mod status_api;
mod store_backends;
mod store_down;
mod telemetry_relay;
mod tls;
mod upgrades;
mod webhook;
mod workload;
