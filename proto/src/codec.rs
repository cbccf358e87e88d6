//! The gRPC codec of fleetop's own service: prost's, with a small buffer.
//!
//! tonic gives every stream a decode buffer of 8 KiB to start with, and a
//! console holds one stream per node: at 10,000 nodes that is 80 MB of
//! buffers for samples of a few hundred bytes. A buffer still grows to
//! hold the largest message it meets (a history batch, a node's first
//! whole sample), so starting small costs nothing but a reallocation; and
//! the sender hands each message on alone, so that the largest message,
//! not the largest burst of them, is what a buffer grows to.

use std::marker::PhantomData;

use tonic::codec::{BufferSettings, Codec};
use tonic_prost::ProstCodec;

/// Where a stream's encode and decode buffers start.
pub const BUFFER_BYTES: usize = 1024;

/// How much the encoder gathers before it hands bytes to the transport:
/// nothing, each message goes as it is encoded. A console's read buffers
/// (h2's and the stream's, kept for the connection's life) grow to the
/// largest chunk they are handed: an agent's first messages gathered into
/// tonic's default 32 KiB left every node's connection with 40 KiB of
/// buffers for samples of under 1 KiB.
const YIELD_BYTES: usize = 1;

#[derive(Debug, Clone)]
pub struct SmallBufferCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for SmallBufferCodec<T, U> {
    fn default() -> Self {
        SmallBufferCodec(PhantomData)
    }
}

impl<T, U> Codec for SmallBufferCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = <ProstCodec<T, U> as Codec>::Encoder;
    type Decoder = <ProstCodec<T, U> as Codec>::Decoder;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::new(BUFFER_BYTES, YIELD_BYTES))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(BufferSettings::new(BUFFER_BYTES, YIELD_BYTES))
    }
}
