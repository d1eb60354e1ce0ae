//! Sending frames on an interface (`weir gen -i`).
