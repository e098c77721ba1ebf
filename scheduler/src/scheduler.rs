pub struct Scheduler;
