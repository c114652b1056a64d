/* A libibverbs.so.1 that lacks ibv_create_qp, for the loader's "missing export" case: it exports
   the other entry points the loader requires (never called: the load fails first). */
#define STUB(name) \
  void name(void);   \
  void name(void) {}
STUB(ibv_get_device_list)
STUB(ibv_free_device_list)
STUB(ibv_get_device_name)
STUB(ibv_open_device)
STUB(ibv_close_device)
STUB(ibv_query_device)
STUB(ibv_query_port)
STUB(ibv_query_gid)
STUB(ibv_alloc_pd)
STUB(ibv_dealloc_pd)
STUB(ibv_reg_mr)
STUB(ibv_dereg_mr)
STUB(ibv_create_comp_channel)
STUB(ibv_destroy_comp_channel)
STUB(ibv_create_cq)
STUB(ibv_destroy_cq)
STUB(ibv_get_cq_event)
STUB(ibv_ack_cq_events)
STUB(ibv_modify_qp)
STUB(ibv_destroy_qp)
STUB(ibv_get_async_event)
STUB(ibv_ack_async_event)
