dist_man7_MANS = man/fi_layer.7
