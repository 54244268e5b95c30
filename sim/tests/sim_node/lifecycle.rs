//! The container lifecycle on the simulated kubelet: probes, hooks, init containers and env.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_probes_hooks_init_and_env() {
    let c = cluster().await;
    let cm: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": NS}, "data": {"greeting": "hello-cm"},
    }))
    .unwrap();
    Api::namespaced(c.client.clone(), NS)
        .create(&PostParams::default(), &cm)
        .await
        .expect("configmap");
    let p: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "life", "namespace": NS},
        "spec": {
            "nodeName": "win-0",
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "shared", "emptyDir": {}}],
            "initContainers": [{"name": "init", "image": AGNHOST, "command": ["cmd", "/c", "echo from-init> C:\\mnt\\shared\\init.txt"],
                                "volumeMounts": [{"name": "shared", "mountPath": "C:\\mnt\\shared"}]}],
            "containers": [{
                "name": "c", "image": AGNHOST, "args": ["netexec", "--http-port=8080", "--udp-port=8081"],
                "ports": [{"name": "http", "containerPort": 8080}],
                "env": [{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                        {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "volumeMounts": [{"name": "shared", "mountPath": "C:\\mnt\\shared"}],
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 1},
                "lifecycle": {"postStart": {"exec": {"command": ["cmd", "/c", "echo from-hook> C:\\mnt\\shared\\hook.txt"]}}},
            }],
        },
    }))
    .unwrap();
    create(&c, p).await;
    let p = wait_pod(&c, "life", "Running and Ready", running_ready).await;
    let init = &p.status.as_ref().unwrap().init_container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        init.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .reason
            .as_deref(),
        Some("Completed")
    );
    let (out, _, _) = exec(&c, "life", &["cmd", "/c", "type C:\\mnt\\shared\\init.txt & type C:\\mnt\\shared\\hook.txt & echo %GREETING% %MY_POD% %KUBERNETES_SERVICE_HOST%"]).await;
    let kube_ip = c.net.block().kubernetes_service().to_string();
    assert!(
        out.contains("from-init")
            && out.contains("from-hook")
            && out.contains("hello-cm life")
            && out.contains(&kube_ip),
        "{out}"
    );
    // A failing liveness probe restarts the container, with Unhealthy and Killing events.
    let live: Pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "live", "namespace": NS},
        "spec": {"nodeName": "lin-0", "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "c", "image": AGNHOST, "args": ["pause"],
            "livenessProbe": {"exec": {"command": ["sh", "-c", "exit 1"]}, "periodSeconds": 1, "failureThreshold": 1},
        }]},
    }))
    .unwrap();
    create(&c, live).await;
    wait_event(&c, "live", "Unhealthy", "Liveness probe failed").await;
    wait_event(&c, "live", "Killing", "failed liveness probe, will be restarted").await;
    wait_pod(&c, "live", "a restart", restarted).await;
    // A missing ConfigMap key is a CreateContainerConfigError naming it.
    let mut bad = pod("badenv", "win-1", AGNHOST, None, vec!["pause"]);
    bad.spec.as_mut().unwrap().containers[0].env = Some(vec![
        serde_json::from_value(serde_json::json!(
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope"}}}
        ))
        .unwrap(),
    ]);
    create(&c, bad).await;
    let msg = wait_waiting(&c, "badenv", "CreateContainerConfigError").await;
    assert!(msg.contains("couldn't find key nope in ConfigMap default/cfg"), "{msg}");
}
