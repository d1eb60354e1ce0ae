//! Packet records over Kafka. A capture streams its records as compressed
//! batches ([`batch`], re-exported as `codec`) to a topic, each frame to the partition of its flow
//! hash so a partition holds whole flows ([`producer`]); collectors in a
//! consumer group write the partitions they hold into ordinary datasets,
//! committing offsets only after the files are durable and skipping what
//! they already wrote ([`collector`]).

pub use batch as codec;
pub mod collector;
pub mod producer;
pub mod stats_msg;
