// softverbs_devinfo_probe: prints, per device, what the config tests check (port state, rate
// codes, max_mw, GID count, QP creation), as one line "NAME port=STATE speed=S width=W
// max_mw=N gids=G", and on softverbs the device's "show" line (what the verbs cannot tell, such
// as the window key mode). A plain verbs program, built with the tests' flags so that it also
// runs under the sanitizers (Debian's ibv_devinfo cannot load a sanitized library).
#include <infiniband/verbs.h>

#include <cstdio>
#include <string>

#include <softverbs/control.h>

int main() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    std::printf("no devices\n");
    if (list != nullptr) ibv_free_device_list(list);
    return 1;
  }
  for (int i = 0; i < n; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      std::printf("%s open failed\n", ibv_get_device_name(list[i]));
      continue;
    }
    ibv_device_attr da{};
    ibv_port_attr pa{};
    ibv_query_device(ctx, &da);
    ibv_query_port(ctx, 1, &pa);
    std::printf("%s port=%s speed=%u width=%u max_mw=%d gids=%d\n", ibv_get_device_name(list[i]),
                ibv_port_state_str(pa.state), pa.active_speed, pa.active_width, da.max_mw,
                pa.gid_tbl_len);
    std::string shown;
    if (softverbs::loaded() &&
        softverbs::control(std::string("show ") + ibv_get_device_name(list[i]), &shown) == 0) {
      std::printf("%s\n", shown.c_str());
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  return 0;
}
