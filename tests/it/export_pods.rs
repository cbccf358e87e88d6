//! The export carries the Kubernetes pods holding each GPU (as the agent
//! read them from the kubelet), and none where no pod holds one.

use fleetop::detect::Thresholds;
use fleetop::export::{Pod, Snapshot};
use fleetop::ingest::demo::{self, SimFleet};
use fleetop::model::sample::PodRef;
use fleetop::model::target::Target;
use fleetop::model::update::{Event, Update};
use fleetop::store::Store;

const NOW: i64 = 1_767_225_600_000;

#[test]
fn each_gpus_pods_are_in_the_export_and_its_schema() {
    let mut sims = SimFleet::new(demo::plan(2, 8, 7, NOW - 600_000));
    let targets: Vec<Target> = sims
        .plan
        .iter()
        .map(|cfg| Target {
            name: cfg.hostname.clone(),
            host: "10.0.0.1".into(),
            port: 50051,
        })
        .collect();
    let mut store = Store::new(targets, Thresholds::default());
    let mut updates = sims.connect(NOW);
    updates.extend(sims.sample(NOW));
    for mut u in updates {
        if let Update::Node {
            node: 0,
            event: Event::Sample(s),
        } = &mut u
        {
            s.gpus[2].pods = vec![
                PodRef {
                    namespace: "ml".into(),
                    pod: "infer".into(),
                    container: "server".into(),
                    mig_uuid: Some("MIG-1".into()),
                },
                PodRef {
                    namespace: "ml".into(),
                    pod: "train-0".into(),
                    container: "trainer".into(),
                    mig_uuid: None,
                },
            ];
        }
        store.apply(u, NOW);
    }
    let snap = fleetop::export::snapshot(&store, NOW);
    let json = serde_json::to_string(&snap).expect("serializes");
    let back: Snapshot = serde_json::from_str(&json).expect("reads back");
    let gpu = &back.nodes[0].gpus[2];
    assert_eq!(
        gpu.pods,
        [
            Pod {
                namespace: "ml".into(),
                pod: "infer".into(),
                container: "server".into(),
                mig_uuid: Some("MIG-1".into()),
            },
            Pod {
                namespace: "ml".into(),
                pod: "train-0".into(),
                container: "trainer".into(),
                mig_uuid: None,
            },
        ]
    );
    assert!(back.nodes[0].gpus[0].pods.is_empty());
    assert!(back.nodes[1].gpus.iter().all(|g| g.pods.is_empty()));
    assert!(fleetop::export::schema_json().contains("\"pods\""));
}
