use serde::{Deserialize, Serialize};

use super::*;

/// A port's error counters are recorded as the list recordings of
/// schema 2 hold, and a list of another length reads as far as it goes.
#[test]
fn ib_error_counters_record_as_the_list_they_were() {
    #[derive(Serialize, Deserialize)]
    struct AsWritten {
        port: u32,
        state: Option<String>,
        phys_state: Option<String>,
        rate_gbps: Option<u32>,
        tx_bytes: u64,
        rx_bytes: u64,
        tx_packets: u64,
        rx_packets: u64,
        errors: Vec<Option<u64>>,
    }
    let mut errors = IbErrors::default();
    errors[0] = Some(7);
    errors[14] = Some(1 << 40);
    let r = IbReading {
        port: 2,
        state: Some("ACTIVE".into()),
        tx_bytes: 9,
        errors,
        ..Default::default()
    };
    let old = AsWritten {
        port: 2,
        state: Some("ACTIVE".into()),
        phys_state: None,
        rate_gbps: None,
        tx_bytes: 9,
        rx_bytes: 0,
        tx_packets: 0,
        rx_packets: 0,
        errors: errors.to_vec(),
    };
    let bytes = postcard::to_allocvec(&old).expect("encodes");
    assert_eq!(postcard::to_allocvec(&r).expect("encodes"), bytes);
    assert_eq!(postcard::from_bytes::<IbReading>(&bytes).expect("decodes"), r);
    let short = AsWritten {
        errors: vec![Some(3), None],
        ..old
    };
    let back: IbReading = postcard::from_bytes(&postcard::to_allocvec(&short).expect("encodes")).expect("decodes");
    assert_eq!(back.errors[0], Some(3));
    assert!(back.errors[1..].iter().all(Option::is_none));
}

/// Socket-wide readings repeat on each CPX partition: one reading per
/// physical GPU, the first partition that answered.
#[test]
fn a_partitioned_gpu_counts_once() {
    let part = |index: u32, bus: &str, id: u32| GpuDesc {
        index,
        pci_bus_id: bus.into(),
        vendor: Vendor::Amd,
        partition: Some(Partition {
            compute: "CPX".into(),
            memory: "NPS4".into(),
            id,
        }),
        ..Default::default()
    };
    let d = NodeDesc {
        gpus: vec![
            part(0, "0000:18:00.0", 0),
            part(1, "0000:18:00.1", 1),
            part(2, "0000:28:00.0", 0),
            part(3, "0000:28:00.1", 1),
        ],
        ..Default::default()
    };
    assert_eq!(d.physical_gpus(), 2);
    let r = |index: u32, lost: bool| GpuReading {
        index,
        error: lost.then_some(GpuError::Lost),
        power_w: (!lost).then_some(700.0 + f64::from(index)),
        ..Default::default()
    };
    let s = NodeSample {
        gpus: vec![r(0, true), r(1, false), r(2, false), r(3, false)],
        ..Default::default()
    };
    let one: Vec<u32> = d.per_physical_gpu(&s).iter().map(|g| g.index).collect();
    assert_eq!(
        one,
        [1, 2],
        "partition 0 of the first is lost: its partition 1 speaks for it"
    );
    assert_eq!(d.vendor(), Vendor::Amd);
    assert_eq!(NodeDesc::default().vendor(), Vendor::Nvidia);
    assert_eq!(
        Partition {
            compute: "SPX".into(),
            memory: "NPS1".into(),
            id: 0
        }
        .words(),
        "SPX/NPS1"
    );
}
