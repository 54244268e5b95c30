// Each test binary uses a part of this module; what one leaves unused is not dead.
#![allow(dead_code)]

//! What the simulator's real-client tests share (`sim_api_kubectl`, `sim_kubectl_pods`,
//! `sim_python_client` each declare `mod support;`): finding the client, the CI rule for a
//! missing one, and a simulated cluster with a kubeconfig for it ([`real_clients`]).

pub mod real_clients;
